// Command evanphx-apply applies an RFC 6902 JSON Patch to a JSON document
// with github.com/evanphx/json-patch (the v4 API that kube-apiserver imports
// as gopkg.in/evanphx/json-patch.v4 in its mutating-webhook dispatcher:
// jsonpatch.DecodePatch(patch) followed by patch.Apply(doc)).
//
// It is a test oracle for bootimage-webhook: tests/support/evanphx.rs builds
// it in GOPATH mode against the Debian package
// golang-github-evanphx-json-patch-dev (see scripts/install-test-deps).
//
// Usage: evanphx-apply DOC_FILE PATCH_FILE
//
// Exit status:
//
//	0  patch applied; the resulting document is printed to stdout
//	1  DecodePatch or Apply (or reading an input file) failed; "error: <message>" on stderr
//	2  wrong usage
//	3  the library panicked; "panic: <value>" on stderr (the Debian 5.2.0 root
//	   package lacks a few v4.12 hardening fixes, e.g. negative array indices
//	   in replace/test/move/copy, a null intermediate value, an empty document)
package main

import (
	"fmt"
	"os"

	jsonpatch "github.com/evanphx/json-patch"
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
