package fleetnode

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/dnssec"
	"github.com/steer-dns/steer/internal/fleet"
)

// keyName is how BIND's dnssec-keygen (and steer dnssec keygen) names a
// key's files: K<zone>+<alg>+<tag>.key and .private.
var keyName = regexp.MustCompile(`^K.+\+[0-9]{3}\+[0-9]{5}\.(key|private)$`)

// isKeyFile reports whether the bundle file name, with contents data, is
// a DNSSEC key file: named as dnssec-keygen names them, or in the
// private key format whatever its name.
func isKeyFile(name string, data []byte) bool {
	return keyName.MatchString(path.Base(name)) || dnssec.IsPrivateKeyFile(data)
}

// Secrets lists the files of bundle b that hold secrets, by name, each
// with what it is (config.SecretDNSSEC, SecretTSIG, SecretCookie): the
// files b's configuration names as secrets (config.SecretPaths) and any
// other file in the private key format. A configuration that does not
// load leaves the files in the private key format. steer fleet push,
// promote and rollback ask it before a bundle with private keys goes to,
// or is made current in, a store that is not TLS and authenticated.
func Secrets(b fleet.Bundle) map[string]string {
	out := map[string]string{}
	for name, data := range b.Files {
		if dnssec.IsPrivateKeyFile(data) {
			out[name] = config.SecretDNSSEC
		}
	}
	cfg, _, err := config.LoadAgain(b.FS(nil), fleet.ConfigName, nil)
	if err != nil {
		return out
	}
	for _, r := range cfg.SecretPaths() {
		if name := fleet.BundleName(r.Path); b.Files[name] != nil {
			out[name] = r.Kind
		}
	}
	return out
}

// HasPrivateKeys reports whether the secrets (Secrets) include a DNSSEC
// private key, and names them.
func HasPrivateKeys(secrets map[string]string) []string {
	var out []string
	for name, kind := range secrets {
		if kind == config.SecretDNSSEC {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// strayKeys refuses the DNSSEC key files of b that no zone of cfg (b's
// configuration) names in its dnssec.keys: a key in the bundle for a zone
// not pushed. steer fleet push bundles only the keys the zones name, and
// the zones' loading checks each key's owner, so such a bundle was made
// by hand or by another tool; the node does not serve it, rather than
// hold private keys nothing accounts for.
func strayKeys(cfg *config.Config, b fleet.Bundle) error {
	named := map[string]bool{}
	for _, r := range cfg.BundledPaths() {
		if strings.Contains(r.Key, ".dnssec.keys[") {
			named[fleet.BundleName(r.Path)] = true
		}
	}
	var stray []string
	for name, data := range b.Files {
		if name != fleet.ConfigName && !named[name] && isKeyFile(name, data) {
			stray = append(stray, name)
		}
	}
	if len(stray) == 0 {
		return nil
	}
	slices.Sort(stray)
	return fmt.Errorf("%s: DNSSEC key files that no zone's dnssec.keys names (keys for a zone not pushed?): a bundle carries the keys of the zones it serves only; push the zone with its keys, or leave them out",
		strings.Join(stray, ", "))
}
