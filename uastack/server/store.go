package server

import (
	"net"
	"os"

	"github.com/uagate/gateway/uastack/pki"
)

// UseStore takes the server's certificate from store, which creates it on
// first use for ApplicationURI (DefaultApplicationURI when unset) and the
// names clients reach the server by: localhost, 127.0.0.1, this host's name
// and the host of Address when it is a specific one. Client certificates are
// then validated with the store: its trust list, and an unknown certificate
// refused and kept in rejected/ (or trusted, with the store's AutoAccept).
func (c *Config) UseStore(store *pki.Store) error {
	hosts := []string{"localhost", "127.0.0.1"}
	if h, err := os.Hostname(); err == nil {
		hosts = append(hosts, h)
	}
	host, _, _ := net.SplitHostPort(c.Address)
	if ip := net.ParseIP(host); host != "" && host != "localhost" && host != "127.0.0.1" && (ip == nil || !ip.IsUnspecified()) {
		hosts = append(hosts, host)
	}
	uri := c.ApplicationURI
	if uri == "" {
		uri = DefaultApplicationURI
	}
	_, der, key, err := store.LoadOrCreateOwn(uri, hosts)
	if err != nil {
		return err
	}
	c.Certificate, c.Key = der, key
	c.ValidateClientCert = func(chain []byte) error {
		_, err := store.Validate(chain, pki.ValidateOptions{Role: pki.PeerClient})
		return err
	}
	return nil
}
