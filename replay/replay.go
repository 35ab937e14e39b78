// Package replay re-evaluates audited decisions against a candidate policy
// pack: each audit line of a decision the policy answered carries the exact
// policy input it was asked about (the canonical envelope and the budgets it
// saw) and the policy's verdict (docs/events.md, "Replay fields"); replay
// asks the candidate the same question and reports every verdict or rule
// that changes. It backs `svc replay`, which gates a policy change in CI.
package replay

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"

	"github.com/svc-dev/svc/engine"
)

// maxLine bounds one audit line (a decision line holds its envelope, whose
// body is at most 256 KiB by default, and budgets).
const maxLine = 8 << 20

// Verdict is a verdict and the rule that gave it.
type Verdict struct {
	Decision string `json:"decision"`
	Rule     string `json:"rule"`
}

// Record is one replayable decision of the audit log.
type Record struct {
	Line       int             `json:"line"`
	DecisionID string          `json:"decision_id"`
	TS         string          `json:"ts"`
	SessionID  string          `json:"session_id"`
	AgentID    string          `json:"agent_id"`
	Ability    string          `json:"ability"`
	Old        Verdict         `json:"old"`
	Input      json.RawMessage `json:"-"`
}

// auditLine is what replay reads of an audit line.
type auditLine struct {
	Event          string          `json:"event"`
	DecisionID     string          `json:"decision_id"`
	TS             string          `json:"ts"`
	SessionID      string          `json:"session_id"`
	AgentID        string          `json:"agent_id"`
	Ability        string          `json:"ability"`
	PolicyDecision string          `json:"policy_decision"`
	PolicyRule     string          `json:"policy_rule"`
	PolicyInput    json.RawMessage `json:"policy_input"`
}

// Read reads the decisions of an audit log (JSONL) that can be replayed,
// in order, and counts the decision lines that cannot: those the policy
// never answered (an engine fault before it did) or written before svc
// recorded policy inputs. A line that is not JSON is an error naming it:
// an audit log is never guessed at.
func Read(r io.Reader) (records []Record, skipped int, err error) {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 64<<10), maxLine)
	for n := 1; s.Scan(); n++ {
		if len(s.Bytes()) == 0 {
			continue
		}
		var l auditLine
		if err := json.Unmarshal(s.Bytes(), &l); err != nil {
			return nil, 0, fmt.Errorf("audit line %d: %w", n, err)
		}
		if l.Event != engine.EventDecision {
			continue
		}
		if len(l.PolicyInput) == 0 || l.PolicyDecision == "" {
			skipped++
			continue
		}
		records = append(records, Record{Line: n, DecisionID: l.DecisionID, TS: l.TS, SessionID: l.SessionID,
			AgentID: l.AgentID, Ability: l.Ability, Old: Verdict{l.PolicyDecision, l.PolicyRule}, Input: l.PolicyInput})
	}
	if err := s.Err(); err != nil {
		return nil, 0, fmt.Errorf("read audit log: %w", err)
	}
	return records, skipped, nil
}

// Change is a decision whose verdict or rule the candidate changes.
type Change struct {
	Record
	New    Verdict `json:"new"`
	Reason string  `json:"new_reason"`
}

// Transition counts the decisions that went from one verdict to another.
type Transition struct {
	Old   Verdict `json:"old"`
	New   Verdict `json:"new"`
	Count int     `json:"count"`
}

// Report is the outcome of a replay.
type Report struct {
	Replayed    int          `json:"replayed"`
	Skipped     int          `json:"skipped"`
	Changed     int          `json:"changed"`
	Transitions []Transition `json:"transitions"`
	Changes     []Change     `json:"changes"`
}

// Run evaluates every record with eval, workers at a time, and reports the
// changes in the order of the log. Any evaluation error stops it: a replay
// that could not ask the candidate everything says nothing.
func Run(ctx context.Context, eval engine.Evaluator, records []Record, workers int) (Report, error) {
	verdicts := make([]engine.Verdict, len(records))
	errs := make([]error, len(records))
	var wg sync.WaitGroup
	next := make(chan int)
	for range max(workers, 1) {
		wg.Go(func() {
			for i := range next {
				verdicts[i], errs[i] = eval.Evaluate(ctx, records[i].Input)
			}
		})
	}
	for i := range records {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return Report{}, fmt.Errorf("evaluate the candidate pack: %w", err)
	}
	return report(records, verdicts), nil
}

func report(records []Record, verdicts []engine.Verdict) Report {
	rep := Report{Replayed: len(records), Transitions: []Transition{}, Changes: []Change{}}
	counts := map[[2]Verdict]int{}
	for i, r := range records {
		v := verdicts[i]
		nv := Verdict{v.Decision, v.Rule}
		if nv == r.Old {
			continue
		}
		rep.Changes = append(rep.Changes, Change{Record: r, New: nv, Reason: v.Reason})
		counts[[2]Verdict{r.Old, nv}]++
	}
	rep.Changed = len(rep.Changes)
	for k, n := range counts {
		rep.Transitions = append(rep.Transitions, Transition{Old: k[0], New: k[1], Count: n})
	}
	sort.Slice(rep.Transitions, func(i, j int) bool {
		a, b := rep.Transitions[i], rep.Transitions[j]
		if a.Count != b.Count {
			return a.Count > b.Count
		}
		return fmt.Sprint(a.Old, a.New) < fmt.Sprint(b.Old, b.New)
	})
	return rep
}

// WriteTable writes the report for a terminal: a summary, the counts per
// old → new verdict and rule, then the changed decisions.
func (rep Report) WriteTable(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "replayed %d decisions (%d not replayable), %d changed\n", rep.Replayed, rep.Skipped, rep.Changed)
	if rep.Changed > 0 {
		fmt.Fprintf(bw, "\n%6s  %-55s  %s\n", "COUNT", "OLD", "NEW")
		for _, t := range rep.Transitions {
			fmt.Fprintf(bw, "%6d  %-55s  %s\n", t.Count, t.Old.Decision+" "+t.Old.Rule, t.New.Decision+" "+t.New.Rule)
		}
		fmt.Fprintf(bw, "\n%-32s  %-24s  %-20s  %-24s  %s\n", "DECISION", "TS", "SESSION", "ABILITY", "OLD → NEW")
		for _, c := range rep.Changes {
			fmt.Fprintf(bw, "%-32s  %-24s  %-20s  %-24s  %s %s → %s %s\n", c.DecisionID, c.TS, c.SessionID, c.Ability,
				c.Old.Decision, c.Old.Rule, c.New.Decision, c.New.Rule)
		}
	}
	return bw.Flush()
}
