package protocol

import (
	"os"
	"strconv"
)

// processExe returns the executable of the live process pid, from
// /proc/<pid>/exe; false when the process is gone or not ours to inspect.
func processExe(pid int) (string, bool) {
	exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	if err != nil || exe == "" {
		return "", false
	}
	return exe, true
}
