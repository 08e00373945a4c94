// Command evanphx-apply applies an RFC 6902 JSON Patch to a JSON document
// with gopkg.in/evanphx/json-patch.v4, the library (and the version, pinned in
// go.mod to what k8s.io/kubernetes requires) that kube-apiserver's mutating
// webhook dispatcher applies webhook patches with: jsonpatch.DecodePatch(patch)
// followed by patch.Apply(doc).
//
// It is a test oracle for bootimage-webhook: tests/support/evanphx.rs builds it
// in module mode with the machine's Go and caches the binary.
//
// Usage: evanphx-apply DOC_FILE PATCH_FILE
//
// Exit status:
//
//	0  patch applied; the resulting document is printed to stdout
//	1  DecodePatch or Apply (or reading an input file) failed; "error: <message>" on stderr
//	2  wrong usage
//	3  the library panicked; "panic: <value>" on stderr
package main

import (
	"fmt"
	"os"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
)

func fail(code int, format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(code)
}

func apply(doc, patchBytes []byte) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			fail(3, "panic: %v", r)
		}
	}()
	patch, err := jsonpatch.DecodePatch(patchBytes)
	if err != nil {
		return nil, fmt.Errorf("decode patch: %v", err)
	}
	return patch.Apply(doc)
}

func main() {
	if len(os.Args) != 3 {
		fail(2, "usage: evanphx-apply DOC_FILE PATCH_FILE")
	}
	doc, err := os.ReadFile(os.Args[1])
	if err != nil {
		fail(1, "error: read document: %v", err)
	}
	patchBytes, err := os.ReadFile(os.Args[2])
	if err != nil {
		fail(1, "error: read patch: %v", err)
	}
	out, err := apply(doc, patchBytes)
	if err != nil {
		fail(1, "error: %v", err)
	}
	if _, err := os.Stdout.Write(append(out, '\n')); err != nil {
		fail(1, "error: write stdout: %v", err)
	}
}
