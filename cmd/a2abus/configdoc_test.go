package main

import (
	"os"
	"strings"
	"testing"
)

// The README's configuration table is the reference of every setting: a
// flag added without a row there, or a row naming the wrong environment
// variable, fails here.
func TestReadmeConfigurationListsEverySetting(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	start := strings.Index(readme, "\n## Configuration\n")
	if start < 0 {
		t.Fatal("README.md has no Configuration section")
	}
	section := readme[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	var rows []string
	for _, line := range strings.Split(section, "\n") {
		if strings.HasPrefix(line, "| `--") {
			rows = append(rows, line)
		}
	}
	for _, s := range settings() {
		row := ""
		for _, r := range rows {
			first, _, _ := strings.Cut(strings.TrimPrefix(r, "| "), " |")
			for _, name := range strings.Split(first, ",") {
				if strings.Trim(strings.TrimSpace(name), "`") == "--"+s.flag {
					row = r
				}
			}
		}
		switch {
		case row == "":
			t.Errorf("README.md's configuration table has no row for --%s (%s)", s.flag, s.usage)
		case s.env != "" && !strings.Contains(row, "`"+s.env+"`"):
			t.Errorf("README.md's row for --%s does not name its environment variable %s: %s", s.flag, s.env, row)
		}
	}
}
