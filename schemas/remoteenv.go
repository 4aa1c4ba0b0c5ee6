package schemas

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Which environment variables a remote agent registered at run time may
// read (RemoteAgentSpec.HeadersFromEnv). A registry entry is written by an
// admin over HTTP and read by every serve and worker process, which send
// the named variable's value to the entry's URL: without a rule, an admin
// could name any secret of those processes (OPENAI_API_KEY, NATS_CREDS …)
// and receive it. So the operator decides: variables named with
// RemoteEnvPrefix, and those the operator lists (cmd's --remote-env-allow)
// on every edge that accepts entries and every process that runs them. The
// edges check an entry when it is written, the processes again when they
// run it (an entry may predate the rule, or come through an edge with
// another list). An agent of the operator's own configuration file is not
// bound by it.

// RemoteEnvPrefix starts the names of the environment variables every
// registered remote agent may read without the operator listing them.
const RemoteEnvPrefix = "A2ABUS_REMOTE_"

// ErrRemoteEnvNotAllowed is returned by CheckRemoteEnv for a variable
// neither named with RemoteEnvPrefix nor listed by the operator.
var ErrRemoteEnvNotAllowed = errors.New("environment variable not allowed for registered agents")

// RemoteEnvAllowed reports whether a registered remote agent may read the
// environment variable name: it starts with RemoteEnvPrefix, or allowed
// (the operator's list) names it.
func RemoteEnvAllowed(name string, allowed []string) bool {
	return (strings.HasPrefix(name, RemoteEnvPrefix) && len(name) > len(RemoteEnvPrefix)) || slices.Contains(allowed, name)
}

// CheckRemoteEnv checks every variable r.HeadersFromEnv names against
// RemoteEnvAllowed, in header order; it returns an error wrapping
// ErrRemoteEnvNotAllowed that names the first refused header and
// variable, the rule, and how the operator allows more, or nil.
func (r *RemoteAgentSpec) CheckRemoteEnv(allowed []string) error {
	headers := make([]string, 0, len(r.HeadersFromEnv))
	for h := range r.HeadersFromEnv {
		headers = append(headers, h)
	}
	slices.Sort(headers)
	for _, h := range headers {
		if v := r.HeadersFromEnv[h]; !RemoteEnvAllowed(v, allowed) {
			return fmt.Errorf("%w: remote.headersFromEnv: header %s names $%s; a registered agent may read only variables named %s… or listed by the operator (--remote-env-allow / $A2ABUS_REMOTE_ENV_ALLOW on the edges, serve and workers)",
				ErrRemoteEnvNotAllowed, h, v, RemoteEnvPrefix)
		}
	}
	return nil
}
