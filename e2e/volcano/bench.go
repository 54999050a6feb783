package main

import (
	"fmt"
	"io"
)

// RunBench is filled in by the cost benchmark.
func RunBench(w io.Writer, release, repo string, command []string, work, sizes string, rounds int) error {
	return fmt.Errorf("not yet")
}
