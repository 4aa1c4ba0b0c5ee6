package edge

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/a2abus/a2abus/schemas"
)

// What the edge takes from a client's message, whatever the dialect: every
// send (1.0 on either binding, 0.3, tasks/send, OpenFang's route) is
// converted to a 1.0 SendMessageRequest and checked once, in checkSend,
// against the part limits of the Config (schemas.PartLimits), with refusals
// naming fields as the call's dialect spells them (dialect.names).

// partLimits are the Config's bounds on a client's message parts.
func (c Config) partLimits() schemas.PartLimits {
	return schemas.PartLimits{
		MaxParts:        c.MaxParts,
		MaxPartBytes:    c.MaxPartBytes,
		MaxMessageBytes: c.MaxMessageBytes,
		MaxURLBytes:     c.MaxPartURLBytes,
		MaxDataDepth:    c.MaxPartDataDepth,
		URLSchemes:      c.AllowedPartURLSchemes,
	}
}

// lowercase returns the strings of list in lower case, as a new slice.
func lowercase(list []string) []string {
	out := make([]string, len(list))
	for i, v := range list {
		out[i] = strings.ToLower(v)
	}
	return out
}

// decodeSend decodes the params of SendMessage and SendStreamingMessage.
// A part's raw content that is not base64 is refused naming the part:
// encoding/json reads raw ([]byte) as standard base64, but its error says
// only at which byte of some string.
func decodeSend(params json.RawMessage) (*schemas.SendMessageRequest, error) {
	var req schemas.SendMessageRequest
	if err := decodeParams(params, &req); err != nil {
		if field := rawNotBase64(params); field != "" {
			return nil, schemas.InvalidField(field, "is not standard base64")
		}
		return nil, err
	}
	return &req, nil
}

// rawNotBase64 returns the path of the first part whose raw content is a
// string encoding/json cannot read as base64, or "" if there is none.
func rawNotBase64(params json.RawMessage) string {
	var probe struct {
		Message *struct {
			Parts []struct {
				Raw *string `json:"raw"`
			} `json:"parts"`
		} `json:"message"`
	}
	if json.Unmarshal(params, &probe) != nil || probe.Message == nil {
		return ""
	}
	for i, p := range probe.Message.Parts {
		if p.Raw == nil {
			continue
		}
		if _, err := base64.StdEncoding.DecodeString(*p.Raw); err != nil {
			return fmt.Sprintf("message.parts[%d].raw", i)
		}
	}
	return ""
}
