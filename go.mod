module github.com/steer-dns/steer

go 1.26.8

require (
	github.com/maxmind/mmdbwriter v1.2.0
	github.com/miekg/dns v1.1.73
	github.com/oschwald/maxminddb-golang/v2 v2.9.0
	github.com/prometheus/client_golang v1.23.2
	github.com/prometheus/client_model v0.6.2
	github.com/prometheus/common v0.66.1
	go.yaml.in/yaml/v3 v3.0.6
	golang.org/x/net v0.57.0
	golang.org/x/sys v0.49.0
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/kr/text v0.2.0 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/procfs v0.16.1 // indirect
	go.yaml.in/yaml/v2 v2.4.2 // indirect
	go4.org/netipx v0.0.0-20231129151722-fdeea329fbba // indirect
	google.golang.org/protobuf v1.36.8 // indirect
)
