package auth_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/a2abus/a2abus/edge/auth"
)

// Example shows the front door's use: authenticate, and on failure answer
// the Failure's status with its challenge.
func Example() {
	keys, err := auth.ParseAPIKeys("ci-key-0123456789abcdef=ci,ops-key-0123456789abcdef=ops")
	if err != nil {
		panic(err)
	}
	a, err := auth.New(context.Background(), auth.Config{APIKeys: keys, Admins: []string{"ops"}})
	if err != nil {
		panic(err)
	}
	serve := func(w http.ResponseWriter, r *http.Request) {
		p, err := a.Authenticate(r)
		var f *auth.Failure
		if errors.As(err, &f) {
			if f.Challenge != "" {
				w.Header().Set("WWW-Authenticate", f.Challenge)
			}
			http.Error(w, f.Reason, f.Status)
			return
		}
		fmt.Fprintf(w, "hello %s (admin %v)", p.Name, p.Admin)
	}

	for _, key := range []string{"", "ops-key-0123456789abcdef", "wrong-key-0123456789abcdef"} {
		r := httptest.NewRequest(http.MethodPost, "/", nil)
		if key != "" {
			r.Header.Set("X-API-Key", key)
		}
		w := httptest.NewRecorder()
		serve(w, r)
		fmt.Printf("%d %q\n", w.Code, w.Body.String())
		if ch := w.Header().Get("WWW-Authenticate"); ch != "" {
			fmt.Println("  WWW-Authenticate:", ch)
		}
	}
	// Output:
	// 401 "no credentials\n"
	//   WWW-Authenticate: Bearer realm="a2abus", APIKey realm="a2abus", header="X-API-Key"
	// 200 "hello ops (admin true)"
	// 401 "unknown API key\n"
	//   WWW-Authenticate: Bearer realm="a2abus", APIKey realm="a2abus", header="X-API-Key", error="invalid_token", error_description="unknown API key"
}
