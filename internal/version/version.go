// Package version holds the version of the cairn binaries.
package version

// Version is the version of cairn and cairnd. Release builds set it with
// -ldflags "-X github.com/cairn-dev/cairn/internal/version.Version=v1.2.3".
var Version = "0.1.0-dev"
