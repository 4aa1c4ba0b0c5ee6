package schemas

import "strings"

// HTTPToken reports whether s is an RFC 9110 token: the syntax of an HTTP
// field name and of an authentication scheme. Every place that writes a
// client-given name into a header checks it here.
func HTTPToken(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("!#$%&'*+-.^_`|~", r):
		default:
			return false
		}
	}
	return true
}

// HeaderValueSafe reports whether s may be an HTTP field value as given:
// no control character (a line break would inject a header).
func HeaderValueSafe(s string) bool {
	return !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

// NotificationToken is the config's token a push notification carries, in
// HeaderNotificationToken or else HeaderNotificationTokenX (get reads a
// request header: http.Header.Get).
func NotificationToken(get func(string) string) string {
	if t := get(HeaderNotificationToken); t != "" {
		return t
	}
	return get(HeaderNotificationTokenX)
}
