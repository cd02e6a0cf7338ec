package mcpclient

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
)

// TrustRoots makes r's HTTP client trust pool's certificates (a test's own
// TLS servers), in place of the system's. Before r's first request.
func (r *Remote) TrustRoots(pool *x509.CertPool) {
	r.tap.base.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: pool}
}
