package cmd

import (
	"context"
	"fmt"

	"github.com/svc-dev/svc/engine"
)

// newEvaluator builds the policy evaluator of the configured mode and checks
// at start-up that it runs and that the policy compiles and decides.
func (a *app) newEvaluator(ctx context.Context, policyDir string) (engine.Evaluator, error) {
	eval := engine.NewEvalEvaluator(a.cfg.OPABin, policyDir, a.cfg.OPATimeout)
	if err := eval.Check(ctx); err != nil {
		return nil, fmt.Errorf("policy engine check failed (SVC_OPA_BIN=%s, policy %s): %w", a.cfg.OPABin, policyDir, err)
	}
	return eval, nil
}
