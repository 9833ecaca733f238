package geo

import (
	"slices"
	"strings"
)

// Country is what steer knows about a country code without a database.
type Country struct {
	Code      string  // ISO 3166-1 alpha-2, upper case
	Name      string  // English short name
	Continent string  // AF AN AS EU NA OC SA
	Lat, Lon  float64 // approximate centroid
}

// countryTable lists every officially assigned ISO 3166-1 alpha-2 code plus
// the non-ISO codes that geo databases emit (AN, AP, EU, XK). It is kept in
// code order. Continents follow MaxMind GeoIP2 (which follows GeoNames): for
// example RU and CY are Europe, TR, GE, AM, AZ and KZ are Asia, EG is Africa,
// PA and TT are North America, TL and UM are Oceania, and the sub-Antarctic
// territories (BV, GS, HM, TF) are Antarctica. Coordinates are rough
// geographic centres, good to a degree or two; they are only meant for
// nearest-site distance estimates.
var countryTable = []Country{
	{"AD", "Andorra", "EU", 42.5, 1.6},
	{"AE", "United Arab Emirates", "AS", 24.0, 54.0},
	{"AF", "Afghanistan", "AS", 33.9, 67.7},
	{"AG", "Antigua and Barbuda", "NA", 17.1, -61.8},
	{"AI", "Anguilla", "NA", 18.2, -63.1},
	{"AL", "Albania", "EU", 41.1, 20.2},
	{"AM", "Armenia", "AS", 40.1, 45.0},
	{"AN", "Netherlands Antilles", "NA", 12.2, -69.0},
	{"AO", "Angola", "AF", -11.5, 17.9},
	{"AP", "Asia/Pacific Region", "AS", 15.0, 105.0},
	{"AQ", "Antarctica", "AN", -75.0, 0.0},
	{"AR", "Argentina", "SA", -36.0, -64.0},
	{"AS", "American Samoa", "OC", -14.3, -170.7},
	{"AT", "Austria", "EU", 47.5, 13.5},
	{"AU", "Australia", "OC", -25.5, 134.0},
	{"AW", "Aruba", "NA", 12.5, -70.0},
	{"AX", "Åland Islands", "EU", 60.2, 20.0},
	{"AZ", "Azerbaijan", "AS", 40.3, 47.6},
	{"BA", "Bosnia and Herzegovina", "EU", 44.0, 17.8},
	{"BB", "Barbados", "NA", 13.2, -59.5},
	{"BD", "Bangladesh", "AS", 23.7, 90.3},
	{"BE", "Belgium", "EU", 50.6, 4.6},
	{"BF", "Burkina Faso", "AF", 12.3, -1.6},
	{"BG", "Bulgaria", "EU", 42.7, 25.3},
	{"BH", "Bahrain", "AS", 26.0, 50.6},
	{"BI", "Burundi", "AF", -3.4, 29.9},
	{"BJ", "Benin", "AF", 9.3, 2.3},
	{"BL", "Saint Barthélemy", "NA", 17.9, -62.8},
	{"BM", "Bermuda", "NA", 32.3, -64.8},
	{"BN", "Brunei", "AS", 4.5, 114.7},
	{"BO", "Bolivia", "SA", -16.7, -64.7},
	{"BQ", "Bonaire, Sint Eustatius and Saba", "NA", 12.2, -68.3},
	{"BR", "Brazil", "SA", -10.0, -53.0},
	{"BS", "Bahamas", "NA", 24.3, -76.0},
	{"BT", "Bhutan", "AS", 27.4, 90.4},
	{"BV", "Bouvet Island", "AN", -54.4, 3.4},
	{"BW", "Botswana", "AF", -22.3, 24.7},
	{"BY", "Belarus", "EU", 53.7, 28.0},
	{"BZ", "Belize", "NA", 17.2, -88.7},
	{"CA", "Canada", "NA", 56.0, -96.0},
	{"CC", "Cocos (Keeling) Islands", "AS", -12.2, 96.9},
	{"CD", "Congo (Democratic Republic)", "AF", -2.9, 23.7},
	{"CF", "Central African Republic", "AF", 6.6, 20.9},
	{"CG", "Congo", "AF", -0.7, 15.2},
	{"CH", "Switzerland", "EU", 46.8, 8.2},
	{"CI", "Côte d'Ivoire", "AF", 7.5, -5.5},
	{"CK", "Cook Islands", "OC", -21.2, -159.8},
	{"CL", "Chile", "SA", -35.7, -71.5},
	{"CM", "Cameroon", "AF", 5.7, 12.7},
	{"CN", "China", "AS", 35.0, 104.0},
	{"CO", "Colombia", "SA", 4.0, -73.0},
	{"CR", "Costa Rica", "NA", 9.9, -84.2},
	{"CU", "Cuba", "NA", 21.7, -79.5},
	{"CV", "Cabo Verde", "AF", 15.9, -24.0},
	{"CW", "Curaçao", "NA", 12.2, -69.0},
	{"CX", "Christmas Island", "AS", -10.5, 105.6},
	{"CY", "Cyprus", "EU", 35.0, 33.2},
	{"CZ", "Czechia", "EU", 49.8, 15.5},
	{"DE", "Germany", "EU", 51.2, 10.4},
	{"DJ", "Djibouti", "AF", 11.8, 42.6},
	{"DK", "Denmark", "EU", 56.0, 10.0},
	{"DM", "Dominica", "NA", 15.4, -61.4},
	{"DO", "Dominican Republic", "NA", 18.8, -70.2},
	{"DZ", "Algeria", "AF", 28.0, 2.6},
	{"EC", "Ecuador", "SA", -1.5, -78.4},
	{"EE", "Estonia", "EU", 58.6, 25.0},
	{"EG", "Egypt", "AF", 26.7, 30.0},
	{"EH", "Western Sahara", "AF", 24.5, -13.0},
	{"ER", "Eritrea", "AF", 15.2, 39.0},
	{"ES", "Spain", "EU", 40.2, -3.6},
	{"ET", "Ethiopia", "AF", 9.0, 39.6},
	{"EU", "Europe", "EU", 50.0, 10.0},
	{"FI", "Finland", "EU", 64.5, 26.0},
	{"FJ", "Fiji", "OC", -17.7, 178.1},
	{"FK", "Falkland Islands", "SA", -51.8, -59.5},
	{"FM", "Micronesia", "OC", 6.9, 158.2},
	{"FO", "Faroe Islands", "EU", 62.0, -6.9},
	{"FR", "France", "EU", 46.6, 2.4},
	{"GA", "Gabon", "AF", -0.6, 11.6},
	{"GB", "United Kingdom", "EU", 54.0, -2.5},
	{"GD", "Grenada", "NA", 12.1, -61.7},
	{"GE", "Georgia", "AS", 42.2, 43.4},
	{"GF", "French Guiana", "SA", 4.0, -53.1},
	{"GG", "Guernsey", "EU", 49.5, -2.6},
	{"GH", "Ghana", "AF", 7.9, -1.0},
	{"GI", "Gibraltar", "EU", 36.1, -5.4},
	{"GL", "Greenland", "NA", 72.0, -40.0},
	{"GM", "Gambia", "AF", 13.4, -15.4},
	{"GN", "Guinea", "AF", 10.4, -10.9},
	{"GP", "Guadeloupe", "NA", 16.2, -61.6},
	{"GQ", "Equatorial Guinea", "AF", 1.6, 10.3},
	{"GR", "Greece", "EU", 39.1, 22.0},
	{"GS", "South Georgia and the South Sandwich Islands", "AN", -54.4, -36.6},
	{"GT", "Guatemala", "NA", 15.7, -90.3},
	{"GU", "Guam", "OC", 13.4, 144.8},
	{"GW", "Guinea-Bissau", "AF", 12.0, -15.0},
	{"GY", "Guyana", "SA", 4.9, -58.9},
	{"HK", "Hong Kong", "AS", 22.3, 114.2},
	{"HM", "Heard Island and McDonald Islands", "AN", -53.1, 73.5},
	{"HN", "Honduras", "NA", 14.8, -86.6},
	{"HR", "Croatia", "EU", 45.1, 15.5},
	{"HT", "Haiti", "NA", 19.0, -72.7},
	{"HU", "Hungary", "EU", 47.2, 19.5},
	{"ID", "Indonesia", "AS", -2.5, 118.0},
	{"IE", "Ireland", "EU", 53.2, -8.2},
	{"IL", "Israel", "AS", 31.4, 35.0},
	{"IM", "Isle of Man", "EU", 54.2, -4.5},
	{"IN", "India", "AS", 21.0, 78.0},
	{"IO", "British Indian Ocean Territory", "AS", -6.3, 71.9},
	{"IQ", "Iraq", "AS", 33.2, 43.7},
	{"IR", "Iran", "AS", 32.4, 53.7},
	{"IS", "Iceland", "EU", 64.9, -18.6},
	{"IT", "Italy", "EU", 42.8, 12.6},
	{"JE", "Jersey", "EU", 49.2, -2.1},
	{"JM", "Jamaica", "NA", 18.1, -77.3},
	{"JO", "Jordan", "AS", 31.2, 36.5},
	{"JP", "Japan", "AS", 36.2, 138.3},
	{"KE", "Kenya", "AF", 0.2, 37.9},
	{"KG", "Kyrgyzstan", "AS", 41.2, 74.8},
	{"KH", "Cambodia", "AS", 12.6, 105.0},
	{"KI", "Kiribati", "OC", 1.4, 173.0},
	{"KM", "Comoros", "AF", -11.9, 43.9},
	{"KN", "Saint Kitts and Nevis", "NA", 17.3, -62.7},
	{"KP", "North Korea", "AS", 40.3, 127.5},
	{"KR", "South Korea", "AS", 36.5, 127.9},
	{"KW", "Kuwait", "AS", 29.3, 47.6},
	{"KY", "Cayman Islands", "NA", 19.3, -81.3},
	{"KZ", "Kazakhstan", "AS", 48.0, 67.0},
	{"LA", "Laos", "AS", 18.2, 103.9},
	{"LB", "Lebanon", "AS", 33.9, 35.9},
	{"LC", "Saint Lucia", "NA", 13.9, -61.0},
	{"LI", "Liechtenstein", "EU", 47.2, 9.6},
	{"LK", "Sri Lanka", "AS", 7.9, 80.8},
	{"LR", "Liberia", "AF", 6.4, -9.4},
	{"LS", "Lesotho", "AF", -29.6, 28.2},
	{"LT", "Lithuania", "EU", 55.2, 23.9},
	{"LU", "Luxembourg", "EU", 49.8, 6.1},
	{"LV", "Latvia", "EU", 56.9, 24.6},
	{"LY", "Libya", "AF", 26.3, 17.2},
	{"MA", "Morocco", "AF", 31.8, -7.1},
	{"MC", "Monaco", "EU", 43.7, 7.4},
	{"MD", "Moldova", "EU", 47.2, 28.4},
	{"ME", "Montenegro", "EU", 42.7, 19.4},
	{"MF", "Saint Martin (French part)", "NA", 18.1, -63.1},
	{"MG", "Madagascar", "AF", -19.4, 46.7},
	{"MH", "Marshall Islands", "OC", 7.1, 171.2},
	{"MK", "North Macedonia", "EU", 41.6, 21.7},
	{"ML", "Mali", "AF", 17.6, -4.0},
	{"MM", "Myanmar", "AS", 21.0, 96.0},
	{"MN", "Mongolia", "AS", 46.9, 103.8},
	{"MO", "Macao", "AS", 22.2, 113.5},
	{"MP", "Northern Mariana Islands", "OC", 15.2, 145.7},
	{"MQ", "Martinique", "NA", 14.6, -61.0},
	{"MR", "Mauritania", "AF", 20.3, -10.3},
	{"MS", "Montserrat", "NA", 16.7, -62.2},
	{"MT", "Malta", "EU", 35.9, 14.4},
	{"MU", "Mauritius", "AF", -20.3, 57.6},
	{"MV", "Maldives", "AS", 3.2, 73.2},
	{"MW", "Malawi", "AF", -13.3, 34.3},
	{"MX", "Mexico", "NA", 23.6, -102.6},
	{"MY", "Malaysia", "AS", 4.2, 102.0},
	{"MZ", "Mozambique", "AF", -18.7, 35.5},
	{"NA", "Namibia", "AF", -22.6, 17.1},
	{"NC", "New Caledonia", "OC", -21.3, 165.6},
	{"NE", "Niger", "AF", 17.6, 8.1},
	{"NF", "Norfolk Island", "OC", -29.0, 168.0},
	{"NG", "Nigeria", "AF", 9.1, 8.7},
	{"NI", "Nicaragua", "NA", 12.9, -85.2},
	{"NL", "Netherlands", "EU", 52.2, 5.3},
	{"NO", "Norway", "EU", 61.0, 9.0},
	{"NP", "Nepal", "AS", 28.4, 84.1},
	{"NR", "Nauru", "OC", -0.5, 166.9},
	{"NU", "Niue", "OC", -19.1, -169.9},
	{"NZ", "New Zealand", "OC", -41.5, 172.5},
	{"OM", "Oman", "AS", 21.5, 56.0},
	{"PA", "Panama", "NA", 8.5, -80.1},
	{"PE", "Peru", "SA", -9.2, -75.0},
	{"PF", "French Polynesia", "OC", -17.7, -149.4},
	{"PG", "Papua New Guinea", "OC", -6.3, 145.0},
	{"PH", "Philippines", "AS", 12.9, 121.8},
	{"PK", "Pakistan", "AS", 30.4, 69.3},
	{"PL", "Poland", "EU", 52.0, 19.4},
	{"PM", "Saint Pierre and Miquelon", "NA", 46.9, -56.3},
	{"PN", "Pitcairn", "OC", -25.1, -130.1},
	{"PR", "Puerto Rico", "NA", 18.2, -66.5},
	{"PS", "Palestine", "AS", 31.9, 35.2},
	{"PT", "Portugal", "EU", 39.6, -8.0},
	{"PW", "Palau", "OC", 7.5, 134.6},
	{"PY", "Paraguay", "SA", -23.4, -58.4},
	{"QA", "Qatar", "AS", 25.3, 51.2},
	{"RE", "Réunion", "AF", -21.1, 55.5},
	{"RO", "Romania", "EU", 45.9, 25.0},
	{"RS", "Serbia", "EU", 44.0, 20.9},
	{"RU", "Russia", "EU", 61.5, 105.3},
	{"RW", "Rwanda", "AF", -1.9, 29.9},
	{"SA", "Saudi Arabia", "AS", 24.0, 45.1},
	{"SB", "Solomon Islands", "OC", -9.6, 160.2},
	{"SC", "Seychelles", "AF", -4.7, 55.5},
	{"SD", "Sudan", "AF", 15.6, 30.0},
	{"SE", "Sweden", "EU", 62.2, 17.6},
	{"SG", "Singapore", "AS", 1.35, 103.8},
	{"SH", "Saint Helena, Ascension and Tristan da Cunha", "AF", -15.9, -5.7},
	{"SI", "Slovenia", "EU", 46.1, 14.8},
	{"SJ", "Svalbard and Jan Mayen", "EU", 78.0, 16.0},
	{"SK", "Slovakia", "EU", 48.7, 19.7},
	{"SL", "Sierra Leone", "AF", 8.5, -11.8},
	{"SM", "San Marino", "EU", 43.9, 12.5},
	{"SN", "Senegal", "AF", 14.5, -14.5},
	{"SO", "Somalia", "AF", 5.2, 46.2},
	{"SR", "Suriname", "SA", 4.0, -55.9},
	{"SS", "South Sudan", "AF", 7.3, 30.3},
	{"ST", "Sao Tome and Principe", "AF", 0.2, 6.6},
	{"SV", "El Salvador", "NA", 13.8, -88.9},
	{"SX", "Sint Maarten (Dutch part)", "NA", 18.0, -63.1},
	{"SY", "Syria", "AS", 35.0, 38.5},
	{"SZ", "Eswatini", "AF", -26.5, 31.5},
	{"TC", "Turks and Caicos Islands", "NA", 21.7, -71.8},
	{"TD", "Chad", "AF", 15.4, 18.7},
	{"TF", "French Southern Territories", "AN", -49.3, 69.3},
	{"TG", "Togo", "AF", 8.6, 0.8},
	{"TH", "Thailand", "AS", 15.9, 101.0},
	{"TJ", "Tajikistan", "AS", 38.9, 71.3},
	{"TK", "Tokelau", "OC", -9.2, -171.8},
	{"TL", "Timor-Leste", "OC", -8.8, 125.7},
	{"TM", "Turkmenistan", "AS", 39.0, 59.6},
	{"TN", "Tunisia", "AF", 33.9, 9.5},
	{"TO", "Tonga", "OC", -21.2, -175.2},
	{"TR", "Turkey", "AS", 39.0, 35.2},
	{"TT", "Trinidad and Tobago", "NA", 10.7, -61.2},
	{"TV", "Tuvalu", "OC", -8.5, 179.2},
	{"TW", "Taiwan", "AS", 23.7, 121.0},
	{"TZ", "Tanzania", "AF", -6.4, 34.9},
	{"UA", "Ukraine", "EU", 48.4, 31.2},
	{"UG", "Uganda", "AF", 1.4, 32.3},
	{"UM", "United States Minor Outlying Islands", "OC", 19.3, 166.6},
	{"US", "United States", "NA", 39.8, -98.6},
	{"UY", "Uruguay", "SA", -32.5, -55.8},
	{"UZ", "Uzbekistan", "AS", 41.4, 64.6},
	{"VA", "Holy See", "EU", 41.9, 12.5},
	{"VC", "Saint Vincent and the Grenadines", "NA", 13.0, -61.2},
	{"VE", "Venezuela", "SA", 7.1, -66.2},
	{"VG", "British Virgin Islands", "NA", 18.4, -64.6},
	{"VI", "U.S. Virgin Islands", "NA", 18.3, -64.9},
	{"VN", "Vietnam", "AS", 16.0, 106.0},
	{"VU", "Vanuatu", "OC", -15.4, 166.9},
	{"WF", "Wallis and Futuna", "OC", -13.8, -177.2},
	{"WS", "Samoa", "OC", -13.8, -172.1},
	{"XK", "Kosovo", "EU", 42.6, 20.9},
	{"YE", "Yemen", "AS", 15.6, 48.5},
	{"YT", "Mayotte", "AF", -12.8, 45.2},
	{"ZA", "South Africa", "AF", -29.0, 25.0},
	{"ZM", "Zambia", "AF", -13.1, 27.8},
	{"ZW", "Zimbabwe", "AF", -19.0, 29.2},
}

func init() {
	slices.SortFunc(countryTable, func(a, b Country) int { return strings.Compare(a.Code, b.Code) })
}

// LookupCountry returns the entry for an upper-case code. A two-letter
// lower- or mixed-case code is also accepted. It does not allocate, and
// needs no index: a binary search of the sorted table (8 steps) instead
// of a map of 250 entries made at every start.
func LookupCountry(code string) (Country, bool) {
	if len(code) != 2 {
		return Country{}, false
	}
	a, b := upper(code[0]), upper(code[1])
	i, j := 0, len(countryTable)
	for i < j {
		h := int(uint(i+j) >> 1)
		if c := countryTable[h].Code; c[0] < a || c[0] == a && c[1] < b {
			i = h + 1
		} else {
			j = h
		}
	}
	if i < len(countryTable) && countryTable[i].Code[0] == a && countryTable[i].Code[1] == b {
		return countryTable[i], true
	}
	return Country{}, false
}

func upper(c byte) byte {
	if 'a' <= c && c <= 'z' {
		return c - ('a' - 'A')
	}
	return c
}

// ContinentOf returns the continent code of a country code, "" if unknown.
func ContinentOf(code string) string {
	c, _ := LookupCountry(code)
	return c.Continent
}

// IsContinent reports whether s is one of AF AN AS EU NA OC SA.
func IsContinent(s string) bool {
	switch s {
	case "AF", "AN", "AS", "EU", "NA", "OC", "SA":
		return true
	}
	return false
}

// Countries returns every entry sorted by code. The slice is a fresh copy
// that the caller may modify.
func Countries() []Country {
	return slices.Clone(countryTable)
}
