# Shared by the bench harnesses that serve the Larkbook zone with gdnsd
# and Knot next to steer (sourced; bench/run.sh, bench/dnssec.sh; they
# define log, die, REPO, WORK, BIN, QUERIES and SAMPLE).

# build_tools TOOL...: steer and the programs bench/TOOL built into $BIN.
build_tools() {
	local t pkgs=()
	command -v go >/dev/null || die "Go is needed (the repository's toolchain, see go.mod)"
	mkdir -p "$BIN"
	log "building steer and the bench tools"
	for t in "$@"; do pkgs+=("./bench/$t"); done
	(cd "$REPO" && go build -o "$BIN/steer" ./cmd/steer && go build -o "$BIN/" "${pkgs[@]}")
}

# larkbook_queries: the embedded geo database converted by geoconv (into
# $WORK/geo-country.mmdb and $WORK/geo-flat.mmdb) and the queries of
# $QUERIES client subnets written by querygen into $WORK/queries.
# Subnets and expected answers come from the original flat database, so
# the answer check also checks the conversion.
larkbook_queries() {
	log "converting the embedded geo database"
	"$BIN/geoconv" -in "$REPO/internal/geo/embedded/iptoasn-country.mmdb.gz" \
		-out "$WORK/geo-country.mmdb" -flat-out "$WORK/geo-flat.mmdb" 2>"$WORK/geoconv.log" ||
		{ cat "$WORK/geoconv.log" >&2; die "geoconv failed"; }
	cat "$WORK/geoconv.log" >&2
	log "generating queries ($QUERIES client subnets)"
	"$BIN/querygen" -db "$WORK/geo-flat.mmdb" -out "$WORK/queries" -n "$QUERIES" -sample "$SAMPLE" 2>"$WORK/querygen.log" ||
		{ cat "$WORK/querygen.log" >&2; die "querygen failed"; }
	cat "$WORK/querygen.log" >&2
}

# The zone every server serves: the Larkbook zone's SOA, NS, MX, TXT, glue
# and static.example.com. shop.example.com is added per server.
zone_base() {
	cat <<'EOF'
$ORIGIN example.com.
$TTL 3600
@       300 IN SOA  ns1.example.com. hostmaster.example.com. (
                2026113001 7200 3600 1209600 300 )
        IN NS   ns1
        IN NS   ns2
        IN MX   10 mail
        IN TXT  "v=spf1 mx -all"
ns1     IN A    192.0.2.53
ns2     IN A    198.51.100.53
        IN AAAA 2001:db8::53
mail    IN A    192.0.2.25
static  IN A    192.0.2.80
        IN AAAA 2001:db8::80
EOF
}

# larkbook_steer_config PORT DB [TOP_LINES [ZONE_LINES]]: steer's
# configuration, on stdout, serving example.com.zone (zone_base: shop is
# the steered record of bench/lib/larkbook-records.yaml) on $BIND:PORT
# with the geo database DB; TOP_LINES are added at the top level,
# ZONE_LINES to the zone's entry.
larkbook_steer_config() {
	printf 'listen: ["%s:%s"]\nidentity: steer-bench\n' "$BIND" "$1"
	if [ -n "${3:-}" ]; then printf '%s\n' "$3"; fi
	printf 'zones:\n  - origin: example.com\n    file: example.com.zone\n'
	if [ -n "${4:-}" ]; then printf '%s\n' "$4"; fi
	cat <<EOF
geo:
  databases: [$2]
ecs: { enabled: true, max_source_v4: 24, max_source_v6: 56 }
records:
$(cat "$REPO/bench/lib/larkbook-records.yaml")
EOF
}

# gdnsd_config DIR DB THREADS: gdnsd's configuration in DIR/config,
# listening on $BIND:$GDNSD_PORT with THREADS UDP threads: shop is a DYNA
# record of the geoip plugin (database DB); the map is continent ->
# country, with Virginia as every default.
gdnsd_config() {
	local d=$1 db=$2 threads=$3
	cat >"$d/config" <<EOF
options => {
  listen => [ $BIND:$GDNSD_PORT ]
  run_dir => $d/run
  state_dir => $d/state
  zones_default_ttl => 3600
  udp_threads => $threads
  tcp_threads => 1
  edns_client_subnet => true
}
plugins => {
  geoip => {
    maps => {
      larkbook => {
        geoip2_db => $db
        datacenters => [ virginia, mumbai, frankfurt ]
        map => {
          default => [ virginia ]
          AS => { default => [ virginia ], IN => [ mumbai ], LK => [ mumbai ], BD => [ mumbai ], NP => [ mumbai ] }
          EU => [ frankfurt ]
          NA => [ virginia ]
          SA => [ virginia ]
        }
      }
    }
    resources => {
      shop => {
        map => larkbook
        dcmap => { virginia => 192.0.2.30, mumbai => 203.0.113.10, frankfurt => 198.51.100.20 }
      }
    }
  }
}
EOF
}

# knot_geo_conf FILE: Knot mod-geoip's geodb views for shop, keyed on
# continent and country, the same map as gdnsd's.
knot_geo_conf() {
	cat >"$1" <<'EOF'
shop.example.com:
  - geo: "AS;IN"
    A: 203.0.113.10
  - geo: "AS;LK"
    A: 203.0.113.10
  - geo: "AS;BD"
    A: 203.0.113.10
  - geo: "AS;NP"
    A: 203.0.113.10
  - geo: "EU;*"
    A: 198.51.100.20
  - geo: "NA;*"
    A: 192.0.2.30
  - geo: "SA;*"
    A: 192.0.2.30
EOF
}
