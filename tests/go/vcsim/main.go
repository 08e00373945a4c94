// vcsim for the vSphere tests: govmomi's vCenter simulator (its VPX model) with two
// datacenters, DC0 and DC1, each with one cluster (DCn_C0, one host), a datastore
// (LocalDS_0) and the VM Network: the two failure domains of the tests. It prints one JSON
// line with its SDK URL and credentials on stdout, then serves until standard input
// closes or it is signalled.
package main

import (
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"github.com/vmware/govmomi/simulator"
	_ "github.com/vmware/govmomi/vapi/simulator"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to serve the SDK on")
	plain := flag.Bool("plain-http", false, "serve plain HTTP instead of HTTPS")
	certFile := flag.String("tls-cert-file", "", "PEM certificate to serve HTTPS with (default: the simulator's self-signed one)")
	keyFile := flag.String("tls-key-file", "", "PEM private key of -tls-cert-file")
	flag.Parse()

	model := simulator.VPX()
	model.Datacenter = 2
	model.Cluster = 1
	model.ClusterHost = 1
	model.Host = 0
	model.Datastore = 1
	model.Machine = 0
	model.Pool = 0
	if err := model.Create(); err != nil {
		fail("create model", err)
	}
	defer model.Remove()
	// The tags the installer attaches are served by the vAPI endpoints.
	model.Service.RegisterEndpoints = true
	model.Service.Listen = &url.URL{Host: *listen}
	if !*plain {
		// vCenter serves HTTPS: with the test's certificate (signed by a CA the client is
		// given), else the simulator's self-signed one.
		model.Service.TLS = new(tls.Config)
		if *certFile != "" {
			pair, err := tls.LoadX509KeyPair(*certFile, *keyFile)
			if err != nil {
				fail("load certificate", err)
			}
			model.Service.TLS.Certificates = []tls.Certificate{pair}
		}
	}
	server := model.Service.NewServer()
	defer server.Close()

	if err := describe(server); err != nil {
		fail("describe", err)
	}
	wait()
}

// describe prints the SDK endpoint and its credentials.
func describe(server *simulator.Server) error {
	user := server.URL.User
	password, _ := user.Password()
	out := map[string]any{
		"url":      server.URL.Scheme + "://" + server.URL.Host + server.URL.Path,
		"host":     server.URL.Host,
		"username": user.Username(),
		"password": password,
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}

func wait() {
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(done)
	}()
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-done:
	case <-signals:
	}
}

func fail(what string, err error) {
	fmt.Fprintf(os.Stderr, "vcsim: %s: %v\n", what, err)
	os.Exit(1)
}
