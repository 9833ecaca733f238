package main

import (
	_ "embed"
	"fmt"
	"io"
	"strings"
)

// steer.yaml.5.txt is the configuration reference of steer.yaml(5), in a
// small markup: "# TITLE" starts a section, "- key: text" a tagged
// paragraph, lines indented by four spaces are shown as they are, a blank
// line starts a paragraph, and `code` is set in bold.
//
//go:embed steer.yaml.5.txt
var configReference string

// manpageCmd writes a man page in roff: "steer manpage 1" is steer(1),
// from the command and flag definitions; "steer manpage 5" is
// steer.yaml(5). The package build runs it (hidden from usage).
func manpageCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 || (args[0] != "1" && args[0] != "5") {
		fmt.Fprintln(stderr, "usage: steer manpage 1|5")
		return 2
	}
	if args[0] == "1" {
		fmt.Fprint(stdout, manSteer())
	} else {
		fmt.Fprint(stdout, manConfig())
	}
	return 0
}

// roff escapes text for roff: backslashes, hyphens (as minus signs, so
// flags copy and paste), and a leading dot or quote.
func roff(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

// inline sets `code` in bold.
func inline(s string) string {
	parts := strings.Split(s, "`")
	for i := range parts {
		parts[i] = roff(parts[i])
		if i%2 == 1 {
			parts[i] = `\fB` + parts[i] + `\fR`
		}
	}
	out := strings.Join(parts, "")
	if strings.HasPrefix(out, ".") || strings.HasPrefix(out, "'") {
		out = `\&` + out
	}
	return out
}

const manDate = "2026-12-01"

func manSteer() string {
	var b strings.Builder
	fmt.Fprintf(&b, ".TH STEER 1 %q \"steer\" \"User Commands\"\n", manDate)
	b.WriteString(".SH NAME\nsteer \\- a GeoDNS authoritative nameserver\n.SH SYNOPSIS\n")
	for _, c := range commands {
		fmt.Fprintf(&b, ".B steer %s\n", c.name)
		if c.synopsis != "" {
			b.WriteString(roff(c.synopsis) + "\n")
		}
		b.WriteString(".br\n")
	}
	b.WriteString(".SH DESCRIPTION\n" + roff("steer is an authoritative DNS server that answers each query for a steered name with the address of the site best placed for the asker: by where the client is (EDNS Client Subnet or the resolver's address), which sites are healthy, and the operator's rules. Its configuration is described in steer.yaml(5).") + "\n")
	b.WriteString(".SH COMMANDS\n")
	for _, c := range commands {
		fmt.Fprintf(&b, ".SS steer %s\n%s\n", c.name, roff(c.desc))
		for _, f := range flagList(c) {
			arg := ""
			if !isBool(f) {
				arg = ` \fI` + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_")) + `\fR`
			}
			fmt.Fprintf(&b, ".TP\n\\fB\\-\\-%s\\fR%s\n%s", roff(f.Name), arg, roff(f.Usage))
			// As flag.PrintDefaults: no zero default, and none where
			// the text says what the default is.
			if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "0s" && !strings.Contains(f.Usage, "(default") {
				fmt.Fprintf(&b, " (default %s)", roff(f.DefValue))
			}
			b.WriteString("\n")
		}
	}
	b.WriteString(".SH SIGNALS\n.TP\n.B SIGHUP\nReload the configuration and zones, and reopen the query log.\n" +
		".TP\n.B SIGUSR1\nReopen the query log (after logrotate).\n.TP\n.BR SIGTERM \", \" SIGINT\nDrain and exit 0.\n")
	fmt.Fprintf(&b, ".SH FILES\n.TP\n.I %s\nThe configuration used without \\-\\-config.\n.TP\n.I /var/lib/steer/\nState: health and override state, last good zone copies (StateDirectory of steer.service).\n", roff(DefaultConfig))
	b.WriteString(".SH ENVIRONMENT\n.TP\n.B STEER_DEFAULT_CONFIG\nReplaces " + roff(DefaultConfig) + " as the default configuration path.\n" +
		".TP\n.B NOTIFY_SOCKET\nSet by systemd for Type=notify: readiness, reloads and stopping are reported to it.\n")
	b.WriteString(".SH EXIT STATUS\n0 on success, 1 when a configuration or a scenario is rejected, a start fails or a simulation is interrupted, 2 for a usage error.\n")
	b.WriteString(".SH SEE ALSO\n.BR steer.yaml (5),\n.BR systemctl (1),\n.BR dig (1)\n")
	return b.String()
}

func manConfig() string {
	var b strings.Builder
	fmt.Fprintf(&b, ".TH STEER.YAML 5 %q \"steer\" \"File Formats\"\n", manDate)
	pre := false
	for _, line := range strings.Split(strings.TrimRight(configReference, "\n"), "\n") {
		if strings.HasPrefix(line, "    ") {
			if !pre {
				b.WriteString(".PP\n.nf\n.RS 4\n")
				pre = true
			}
			b.WriteString(roff(line[4:]) + "\n")
			continue
		}
		if pre {
			b.WriteString(".RE\n.fi\n")
			pre = false
		}
		switch {
		case strings.HasPrefix(line, "# "):
			fmt.Fprintf(&b, ".SH %s\n", roff(strings.ToUpper(line[2:])))
		case strings.HasPrefix(line, "- "):
			key, text, _ := strings.Cut(line[2:], ": ")
			fmt.Fprintf(&b, ".TP\n.B %s\n%s\n", roff(key), inline(text))
		case line == "":
			b.WriteString(".PP\n")
		default:
			b.WriteString(inline(line) + "\n")
		}
	}
	if pre {
		b.WriteString(".RE\n.fi\n")
	}
	return b.String()
}

// completionCmd prints a completion script for bash, zsh or fish, from
// the same command and flag definitions.
func completionCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: steer completion bash|zsh|fish")
		return 2
	}
	var names []string
	for _, c := range commands {
		names = append(names, c.name)
	}
	flagsOf := func(c command) (all, files []string) {
		for _, f := range flagList(c) {
			all = append(all, "--"+f.Name)
			if fileFlag(f.Name) {
				files = append(files, "--"+f.Name)
			}
		}
		return all, files
	}
	switch args[0] {
	case "bash":
		fmt.Fprintf(stdout, `# bash completion for steer (generated by "steer completion bash")
_steer() {
	local cur prev words cword
	_init_completion 2>/dev/null || { cur="${COMP_WORDS[COMP_CWORD]}"; prev="${COMP_WORDS[COMP_CWORD-1]}"; cword=$COMP_CWORD; words=("${COMP_WORDS[@]}"); }
	if [ "$cword" -eq 1 ]; then
		COMPREPLY=($(compgen -W %q -- "$cur"))
		return
	fi
	case "$prev" in
	--config|--pid-file|--token-file|--scenario|--from-log) COMPREPLY=($(compgen -f -- "$cur")); return ;;
	--out|--dir) COMPREPLY=($(compgen -d -- "$cur")); return ;;
	--log-format) COMPREPLY=($(compgen -W "text json" -- "$cur")); return ;;
	--log-level) COMPREPLY=($(compgen -W "debug info warn error" -- "$cur")); return ;;
	esac
	local flags=""
	case "${words[1]}" in
`, strings.Join(names, " "))
		for _, c := range commands {
			all, _ := flagsOf(c)
			if w, ok := subWords[c.name]; ok {
				all = append(append([]string(nil), w...), all...)
			}
			fmt.Fprintf(stdout, "\t%s) flags=%q ;;\n", c.name, strings.Join(all, " "))
		}
		fmt.Fprint(stdout, "\tesac\n\tCOMPREPLY=($(compgen -W \"$flags\" -- \"$cur\"))\n}\ncomplete -F _steer steer\n")
	case "zsh":
		fmt.Fprint(stdout, "#compdef steer\n# zsh completion for steer (generated by \"steer completion zsh\")\n_steer() {\n\tlocal -a cmds\n\tcmds=(\n")
		for _, c := range commands {
			fmt.Fprintf(stdout, "\t\t%s\n", zshQuote(c.name+":"+c.summary))
		}
		fmt.Fprint(stdout, "\t)\n\tif (( CURRENT == 2 )); then\n\t\t_describe command cmds\n\t\treturn\n\tfi\n\tlocal sub=$words[2]\n\tshift words\n\t(( CURRENT-- ))\n\tcase $sub in\n")
		for _, c := range commands {
			fmt.Fprintf(stdout, "\t%s)\n\t\t_arguments", c.name)
			if w, ok := subWords[c.name]; ok {
				fmt.Fprintf(stdout, " '1:%s:(%s)'", c.name, strings.Join(w, " "))
			}
			for _, f := range flagList(c) {
				spec := "--" + f.Name + "[" + strings.NewReplacer("[", "(", "]", ")", "'", "").Replace(f.Usage) + "]"
				if _, ok := f.Value.(*listFlag); ok {
					spec = "*" + spec // repeatable
				}
				if !isBool(f) {
					switch {
					case fileFlag(f.Name):
						spec += ":file:_files"
					case dirFlag(f.Name):
						spec += ":directory:_directories"
					default:
						spec += ":" + f.Name + ":"
					}
				}
				fmt.Fprintf(stdout, " \\\n\t\t\t%s", zshQuote(spec))
			}
			fmt.Fprint(stdout, " ;;\n")
		}
		// Autoloaded from fpath the file runs as _steer: complete; sourced, register.
		fmt.Fprint(stdout, "\tesac\n}\nif [ \"$funcstack[1]\" = _steer ]; then\n\t_steer \"$@\"\nelse\n\tcompdef _steer steer\nfi\n")
	case "fish":
		fmt.Fprint(stdout, "# fish completion for steer (generated by \"steer completion fish\")\ncomplete -c steer -f\n")
		for _, c := range commands {
			fmt.Fprintf(stdout, "complete -c steer -n __fish_use_subcommand -a %s -d %s\n", c.name, fishQuote(c.summary))
			if w, ok := subWords[c.name]; ok {
				fmt.Fprintf(stdout, "complete -c steer -n '__fish_seen_subcommand_from %s' -a '%s'\n", c.name, strings.Join(w, " "))
			}
			for _, f := range flagList(c) {
				extra := ""
				if !isBool(f) {
					extra = " -r"
					if fileFlag(f.Name) {
						extra += " -F"
					} else if dirFlag(f.Name) {
						extra += " -a '(__fish_complete_directories)'"
					}
				}
				fmt.Fprintf(stdout, "complete -c steer -n '__fish_seen_subcommand_from %s' -l %s%s -d %s\n", c.name, f.Name, extra, fishQuote(f.Usage))
			}
		}
	default:
		fmt.Fprintf(stderr, "steer completion: %q is not bash, zsh or fish\n", args[0])
		return 2
	}
	return 0
}

// fileFlag says whether a flag names a file (completed with file
// names); dirFlag whether it names a directory.
func fileFlag(name string) bool {
	return name == "config" || strings.HasSuffix(name, "-file") || name == "scenario" || name == "from-log"
}

func dirFlag(name string) bool { return name == "out" || name == "dir" }

func zshQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
func fishQuote(s string) string {
	return "'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "'", `\'`) + "'"
}

// subWords are the words a command takes first (completed like flags).
var subWords = map[string][]string{
	"completion": {"bash", "zsh", "fish"},
	"dnssec":     {"keygen", "ds", "ds-check", "status", "roll-ksk"},
	"fleet":      {"push", "status", "promote", "rollback"},
	"rum":        {"report"},
}
