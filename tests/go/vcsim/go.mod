// vCenter simulator for the vSphere tests (scripts/build-vcsim builds and caches it).
module bootimage-webhook/tests/go/vcsim

go 1.26.8

require github.com/vmware/govmomi v0.56.0

require (
	github.com/google/uuid v1.6.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
