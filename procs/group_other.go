//go:build !unix

package procs

import (
	"errors"
	"os"
	"os/exec"
)

const logOpenFlags = os.O_WRONLY | os.O_CREATE | os.O_APPEND

var errNoGroups = errors.New("procs: process groups are not supported on this platform")

func setGroup(*exec.Cmd)    {}
func setDetached(*exec.Cmd) {}
func killGroup(int) error   { return errNoGroups }
func termGroup(int) error   { return errNoGroups }
func groupAlive(int) bool   { return false }
