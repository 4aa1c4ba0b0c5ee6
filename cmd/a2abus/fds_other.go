//go:build !(linux || darwin)

package main

import "errors"

// raiseFDLimit knows no file limit here: the configured caps apply as
// they are.
func raiseFDLimit() (soft, hard uint64, err error) { return 0, 0, errors.ErrUnsupported }
