module github.com/steer-dns/steer

go 1.26.8

require (
	github.com/maxmind/mmdbwriter v1.2.0
	github.com/miekg/dns v1.1.73
	github.com/oschwald/maxminddb-golang/v2 v2.9.0
	go.yaml.in/yaml/v3 v3.0.6
	golang.org/x/net v0.57.0
	golang.org/x/sys v0.49.0
)

require go4.org/netipx v0.0.0-20231129151722-fdeea329fbba // indirect
