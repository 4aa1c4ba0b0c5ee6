package schemas

import (
	"fmt"
	"mime"
	"net/url"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The form and bounds of the parts of a client's message. Validate checks
// what the protocol requires (one content per part); CheckInput adds what
// a server that hands client content to agents must hold: a file's media
// type and name are well formed, a URL is one an agent may fetch, and no
// part or message is bigger than the edge takes. Every refusal is an
// ErrInvalidParams occurrence whose message starts with the field's path
// as the client's dialect spells it, with the path also as ErrorInfo
// metadata "field", so a client (and a test) reads which field without
// parsing the text.

// PartLimits bounds the parts of one client message. The edge fills it
// from its Config; DefaultPartLimits holds the defaults.
type PartLimits struct {
	// MaxParts bounds the parts of one message.
	MaxParts int
	// MaxPartBytes bounds the content of one part, measured as PartSize.
	MaxPartBytes int
	// MaxMessageBytes bounds the content of all parts of one message.
	MaxMessageBytes int
	// MaxURLBytes bounds the URL of a URL part.
	MaxURLBytes int
	// MaxDataDepth bounds the nesting of a data part's JSON value.
	MaxDataDepth int
	// URLSchemes are the schemes a URL part may use, lowercase.
	URLSchemes []string
}

// DefaultPartLimits returns the bounds an edge applies unless configured
// otherwise: 256 parts, 1 MiB per part and 2 MiB per message (below the
// edge's 4 MiB body limit, so a client meets a bound that names the
// field; the bus's task record bound, 1 MiB by default, applies too), 8 KiB
// URLs with the schemes http, https and data, and data nested at most 32
// deep.
func DefaultPartLimits() PartLimits {
	return PartLimits{
		MaxParts:        256,
		MaxPartBytes:    1 << 20,
		MaxMessageBytes: 2 << 20,
		MaxURLBytes:     8 << 10,
		MaxDataDepth:    32,
		URLSchemes:      []string{"http", "https", "data"},
	}
}

// The bounds of a part's name and media type, fixed: 255 bytes is what
// file systems take for one name.
const (
	maxFilenameBytes  = 255
	maxMediaTypeBytes = 255
)

// FieldNames says how a message's wire form spells a part's fields, so a
// refusal names the field the client sent, not its 1.0 counterpart.
type FieldNames int

const (
	// FieldNamesV1 is A2A 1.0: raw, url, data, mediaType, filename.
	FieldNamesV1 FieldNames = iota
	// FieldNamesV03 is A2A 0.3, and the older tasks/send dialect and
	// OpenFang's routes, whose parts spell files alike: file.bytes,
	// file.uri, file.mimeType, file.name; a text or data part carries its
	// media type and name in metadata (see PartToV03).
	FieldNamesV03
)

// field returns the path of one field of the part at path, as n spells
// it. The 1.0 names are the keys: raw, url, data, mediaType, filename.
func (n FieldNames) field(path string, p *Part, key string) string {
	if n == FieldNamesV03 {
		file := p.Raw != nil || p.URL != nil
		switch {
		case key == "raw":
			key = "file.bytes"
		case key == "url":
			key = "file.uri"
		case key == "mediaType" && file:
			key = "file.mimeType"
		case key == "filename" && file:
			key = "file.name"
		case key == "mediaType":
			key = "metadata." + mediaTypeKey
		case key == "filename":
			key = "metadata." + filenameKey
		}
	}
	return path + "." + key
}

// InvalidField returns an ErrInvalidParams occurrence about the field at
// path: the message is the path followed by the formatted reason, and the
// ErrorInfo metadata "field" holds the path.
func InvalidField(path, format string, args ...any) *Error {
	return Errorf(ErrInvalidParams, "%s %s", path, fmt.Sprintf(format, args...)).With("field", path)
}

// CheckInput checks a client's SendMessage request: Validate, then the
// ids its message carries (see CheckID), the bounds of l and the form of
// every part of its message (see PartLimits and checkPart), naming fields
// as names spells them. It returns an ErrInvalidParams occurrence naming
// the first field at fault.
func (r *SendMessageRequest) CheckInput(l PartLimits, names FieldNames) error {
	if r.Message != nil && len(r.Message.Parts) > l.MaxParts {
		return InvalidField("message.parts", "holds %d parts, more than the limit of %d", len(r.Message.Parts), l.MaxParts)
	}
	if err := r.Validate(); err != nil {
		return err
	}
	if err := r.Message.checkIDs("message"); err != nil {
		return err
	}
	total := 0
	for i := range r.Message.Parts {
		p := &r.Message.Parts[i]
		path := fmt.Sprintf("message.parts[%d]", i)
		if err := checkPart(p, path, l, names); err != nil {
			return err
		}
		total += PartSize(p)
		if total > l.MaxMessageBytes {
			return InvalidField("message.parts", "hold more than the limit of %d bytes together (%d by parts[%d])", l.MaxMessageBytes, total, i)
		}
	}
	return nil
}

// PartSize is the size of a part's content: the bytes of its text, of its
// raw content (decoded), of its URL, or of its data's JSON.
func PartSize(p *Part) int {
	switch {
	case p.Text != nil:
		return len(*p.Text)
	case p.Raw != nil:
		return len(p.Raw)
	case p.URL != nil:
		return len(*p.URL)
	}
	return len(p.Data)
}

// checkPart checks one part that Validate accepted (it has exactly one
// content): its size, its content's form, and its media type and file name.
func checkPart(p *Part, path string, l PartLimits, names FieldNames) error {
	content := "data"
	switch {
	case p.Text != nil:
		content = "text"
	case p.Raw != nil:
		content = "raw"
	case p.URL != nil:
		content = "url"
	}
	if n := PartSize(p); n > l.MaxPartBytes {
		return InvalidField(names.field(path, p, content), "holds %d bytes, more than the limit of %d per part", n, l.MaxPartBytes)
	}
	switch content {
	case "raw":
		if p.MediaType == "" {
			return InvalidField(names.field(path, p, "mediaType"), "is required for a file given by its bytes")
		}
	case "url":
		if err := checkPartURL(*p.URL, l); err != "" {
			return InvalidField(names.field(path, p, content), "%s", err)
		}
	case "data":
		if d := JSONDepth(p.Data); d > l.MaxDataDepth {
			return InvalidField(names.field(path, p, content), "nests %d deep, more than the limit of %d", d, l.MaxDataDepth)
		}
	}
	if p.MediaType != "" {
		if err := checkMediaType(p.MediaType); err != "" {
			return InvalidField(names.field(path, p, "mediaType"), "%s", err)
		}
	}
	if p.Filename != "" {
		if err := checkFilename(p.Filename); err != "" {
			return InvalidField(names.field(path, p, "filename"), "%s", err)
		}
	}
	return nil
}

// checkMediaType returns why mt is not a media type ("" if it is one):
// type/subtype with optional parameters, as mime.ParseMediaType reads them.
func checkMediaType(mt string) string {
	if len(mt) > maxMediaTypeBytes {
		return fmt.Sprintf("is longer than %d bytes", maxMediaTypeBytes)
	}
	t, _, err := mime.ParseMediaType(mt)
	if err != nil {
		return fmt.Sprintf("%q is not a media type (type/subtype): %v", mt, err)
	}
	if !strings.Contains(t, "/") {
		return fmt.Sprintf("%q is not a media type: it names no subtype (type/subtype)", mt)
	}
	return ""
}

// checkFilename returns why name may not name a file ("" if it may): an
// agent may store the file under it, so it is one name, not a path: no
// separator, not "." or ".." (which name directories), no control
// character, at most 255 bytes of UTF-8. Dots within a name
// (report..v2.pdf) are a name's own.
func checkFilename(name string) string {
	switch {
	case len(name) > maxFilenameBytes:
		return fmt.Sprintf("is longer than %d bytes", maxFilenameBytes)
	case !utf8.ValidString(name):
		return "is not valid UTF-8"
	case strings.ContainsAny(name, `/\`):
		return `holds a path separator (/ or \); send a file name, not a path`
	case name == "." || name == "..":
		return fmt.Sprintf("is %q, which names a directory; send a file name", name)
	case strings.ContainsFunc(name, unicode.IsControl):
		return "holds a control character"
	}
	return ""
}

// checkPartURL returns why u may not be a URL part's URL ("" if it may):
// at most l.MaxURLBytes, absolute, with a scheme of l.URLSchemes; an http
// or https URL names a host and a data URL has its comma.
func checkPartURL(u string, l PartLimits) string {
	if len(u) > l.MaxURLBytes {
		return fmt.Sprintf("is %d bytes long, more than the limit of %d", len(u), l.MaxURLBytes)
	}
	pu, err := url.Parse(u)
	if err != nil {
		return fmt.Sprintf("is not a URL: %v", err)
	}
	if pu.Scheme == "" {
		return "is not an absolute URL (it has no scheme)"
	}
	if !slices.Contains(l.URLSchemes, pu.Scheme) {
		return fmt.Sprintf("has the scheme %q; this server takes only %s", pu.Scheme, strings.Join(l.URLSchemes, ", "))
	}
	switch pu.Scheme {
	case "http", "https":
		if pu.Host == "" {
			return "names no host"
		}
	case "data":
		if !strings.Contains(pu.Opaque, ",") {
			return "is not a data URL (data:[<media type>][;base64],<data>)"
		}
	}
	return ""
}

// JSONDepth returns the nesting depth of valid JSON: 0 for a scalar, 1 for
// an object or array of scalars, and so on. It reads the bytes once and
// allocates nothing, so a bound can be checked before anything decodes
// them.
func JSONDepth(b []byte) int {
	depth, deepest := 0, 0
	inStr, esc := false, false
	for _, c := range b {
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '{', '[':
			depth++
			deepest = max(deepest, depth)
		case '}', ']':
			depth--
		}
	}
	return deepest
}
