// The JSON Patch test oracle (tests/support/evanphx.rs builds it). It pins the
// library version that k8s.io/kubernetes (tests/go/controlplane/1.37/go.mod) requires;
// `scripts/test-apiserver build` checks that the two agree.
module bootimage-webhook/tests/go/evanphx

go 1.26.0

require gopkg.in/evanphx/json-patch.v4 v4.13.0
