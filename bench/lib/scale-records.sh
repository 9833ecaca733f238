# Sourced by bench/scale.sh and bench/metrics.sh: the names-at-scale shape
# both measure, so their figures are of the same configuration.

# scale_countries: the second country of each named policy.
SCALE_COUNTRIES=(US DE FR BR JP CN GB IT ES CA MX AU)

# scale_policies_and_records NAMES POLICIES prints steer.yaml's policies:
# and records: sections: POLICIES named policies (IN plus one other
# country to Mumbai, Europe to Frankfurt, the rest to Virginia) and NAMES
# steered names sN.example.com, name i on policy i mod POLICIES.
scale_policies_and_records() {
	local names=$1 policies=$2 i k
	echo "policies:"
	for ((k = 0; k < policies; k++)); do
		cat <<YAML
  p$k:
    rules:
      - match: { country: [IN, ${SCALE_COUNTRIES[$((k % ${#SCALE_COUNTRIES[@]}))]}] }
        pool: mumbai
      - match: { continent: EU }
        pool: frankfurt
      - default: { pool: virginia }
YAML
	done
	echo "records:"
	for ((i = 0; i < names; i++)); do
		printf '  - { name: s%d.example.com, ttl: 60, policy: p%d, pools: { mumbai: { address: 203.0.113.%d }, frankfurt: { address: 198.51.100.%d }, virginia: { address: 192.0.2.%d } } }\n' \
			"$i" $((i % policies)) $((i % 250 + 1)) $((i % 250 + 1)) $((i % 250 + 1))
	done
}
