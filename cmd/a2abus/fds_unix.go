//go:build linux || darwin

package main

import "syscall"

// raiseFDLimit raises the soft limit on open files to the hard one and
// returns both. Go's runtime already raises it when a program starts
// (and gives exec'd programs, such as exec agents, the original back);
// it is raised here only where that did not happen, because calling
// Setrlimit makes exec'd programs inherit the raised limit. A hard limit
// of "unlimited" is left to the runtime too (macOS refuses it as a soft
// limit).
func raiseFDLimit() (soft, hard uint64, err error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, 0, err
	}
	if lim.Max < 1<<40 && lim.Cur+1 < lim.Max {
		raised := lim
		raised.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
			return lim.Cur, lim.Max, err
		}
		lim = raised
	}
	return lim.Cur, lim.Max, nil
}
