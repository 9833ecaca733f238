package anycast

import "fmt"

// Condition is one thing that must hold for the node to be announced,
// e.g. "config" (configuration and zones loaded), "self_check", "geo" or
// "health". Detail says why it holds or not, for logs and status.
type Condition struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// Control is the operator's manual control, set through the admin API.
type Control uint8

// Controls. ControlAuto follows the configured mode; ControlAnnounce makes
// a standby node announce (still only while healthy: a forced announce of
// a node that cannot answer would black-hole queries); ControlWithdraw
// withdraws whatever the conditions say.
const (
	ControlAuto Control = iota
	ControlAnnounce
	ControlWithdraw
)

// String returns "auto", "announce" or "withdraw".
func (c Control) String() string {
	switch c {
	case ControlAnnounce:
		return "announce"
	case ControlWithdraw:
		return "withdraw"
	}
	return "auto"
}

// ParseControl parses "auto", "announce" or "withdraw".
func ParseControl(s string) (Control, error) {
	switch s {
	case "auto":
		return ControlAuto, nil
	case "announce":
		return ControlAnnounce, nil
	case "withdraw":
		return ControlWithdraw, nil
	}
	return ControlAuto, fmt.Errorf("unknown anycast control %q (want announce, withdraw or auto)", s)
}

// Transition reasons: the reason label of the transitions counter. A
// failing condition's reason is its name with "_failed" appended.
const (
	ReasonHealthy          = "healthy"           // every condition holds
	ReasonStandby          = "standby"           // standby mode, not told to announce
	ReasonOperatorAnnounce = "operator_announce" // announced because the operator said so
	ReasonOperatorWithdraw = "operator_withdraw" // withdrawn because the operator said so
	ReasonOverload         = "overload"          // announced with the AS path prepended
	ReasonShutdown         = "shutdown"          // withdrawn for a graceful shutdown
)

// Decision is what should be announced, and why.
type Decision struct {
	Announce bool
	Prepend  int // extra copies of the local AS (only when Announce)
	Reason   string
	Detail   string
}

// Decide is the controller's rule: withdraw when the operator says so or
// any condition fails (the first failing one is the reason); otherwise
// stay withdrawn in standby unless told to announce; otherwise announce,
// prepending prepend copies of the local AS while overloaded.
func Decide(standby bool, ctl Control, conds []Condition, overloaded bool, prepend int) Decision {
	if ctl == ControlWithdraw {
		return Decision{Reason: ReasonOperatorWithdraw, Detail: "withdrawn by the operator (POST /v1/anycast/withdraw)"}
	}
	for _, c := range conds {
		if !c.OK {
			return Decision{Reason: c.Name + "_failed", Detail: c.Name + ": " + c.Detail}
		}
	}
	d := Decision{Announce: true, Reason: ReasonHealthy, Detail: "every condition holds"}
	if standby {
		if ctl != ControlAnnounce {
			return Decision{Reason: ReasonStandby, Detail: "standby: not announced until POST /v1/anycast/announce"}
		}
		d.Reason, d.Detail = ReasonOperatorAnnounce, "standby node announced by the operator; every condition holds"
	}
	if overloaded && prepend > 0 {
		d.Prepend = prepend
		d.Reason, d.Detail = ReasonOverload, fmt.Sprintf("overloaded: announced with the local AS prepended %d times", prepend)
	}
	return d
}
