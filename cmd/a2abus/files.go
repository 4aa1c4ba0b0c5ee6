package main

import (
	"bytes"
	"fmt"
	"os"

	"github.com/a2abus/a2abus/edge/auth"
)

// What cmd reads for the other packages. cmd is the one package that
// reads the environment and files (TestOnlyCmdReadsTheEnvironmentAndFiles):
// edge/auth parses the credentials it is handed, agents and MCP servers
// get the environment cmd gives them.

// loadAPIKeyFile reads an API key file (auth.ReadAPIKeys says its lines);
// an error names the file and a line by its number, never a key.
func loadAPIKeyFile(path string) ([]auth.APIKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	keys, err := auth.ReadAPIKeys(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return keys, nil
}

// loadSigningKeys reads the JWK set push notifications are signed with
// (auth.ParseSigningKeys).
func loadSigningKeys(path, issuer string) (*auth.SigningKeys, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: notification signing keys: %v", auth.ErrInvalidConfig, err)
	}
	return auth.ParseSigningKeys(data, issuer)
}

// environ is the "NAME=value" of each variable of names this process's
// environment sets: what a child process given only those gets.
func environ(names []string) []string {
	env := []string{}
	for _, name := range names {
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	return env
}
