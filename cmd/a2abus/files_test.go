package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/a2abus/a2abus/edge/auth"
)

// An API key file is read as auth.ReadAPIKeys reads keys; its errors name
// the file and the line, never the key, and a missing file is that.
func TestLoadAPIKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(path, []byte("# keys\nk1-0123456789abcdef alice\nk2-0123456789abcdef root admin\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	keys, err := loadAPIKeyFile(path)
	if err != nil || len(keys) != 2 || keys[0].Principal != "alice" || !keys[1].Admin {
		t.Fatalf("keys %+v, %v", keys, err)
	}
	if err := os.WriteFile(path, []byte("# ok\nk1-secret-0123456789 alice root\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = loadAPIKeyFile(path)
	if !errors.Is(err, auth.ErrInvalidConfig) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "line 2") || strings.Contains(err.Error(), "secret") {
		t.Fatalf("bad line: %v", err)
	}
	if _, err := loadAPIKeyFile(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}
