package fleetnode

import (
	"time"

	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/fleet"
)

// EtcdConfig is how to reach the store the local file's fleet section
// names: endpoints, dial timeout, TLS files (resolved beside the file) and
// credentials (the password was read with the configuration). A node and
// steer fleet --fleet NODE.yaml both go by it.
func EtcdConfig(local *config.Config) fleet.EtcdConfig {
	f := local.Fleet
	ec := fleet.EtcdConfig{
		Endpoints:   f.Etcd.Endpoints,
		DialTimeout: time.Duration(f.Etcd.DialTimeout),
		Username:    f.Etcd.Username,
		Password:    f.Etcd.Password.Value(),
	}
	if f.Etcd.TLS.CA != "" {
		ec.CAFile = local.Resolve(f.Etcd.TLS.CA)
	}
	if f.Etcd.TLS.Cert != "" {
		ec.CertFile, ec.KeyFile = local.Resolve(f.Etcd.TLS.Cert), local.Resolve(f.Etcd.TLS.Key)
	}
	return ec
}
