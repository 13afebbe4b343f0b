// Command pod-security checks pods against their namespaces' Pod Security levels with the
// Kubernetes project's own implementation of the standards (k8s.io/pod-security-admission, the
// library the API server's admission plugin runs), at the module release of the Kubernetes
// version the platform pins.
//
// It reads one JSON document on stdin:
//
//	{"namespaces": {"<name>": {"<label>": "<value>", ...}, ...},
//	 "pods": [{"name": "<what to call it>", "namespace": "<name>", "metadata": {...}, "spec": {...}}, ...]}
//
// Each namespace's levels come from its pod-security.kubernetes.io/ labels, read by the library
// (an unlabelled namespace enforces privileged, as the API server's default does). Every pod is
// evaluated against its namespace's enforced level and version, and against the level it warns at
// where that one differs. It writes one JSON document on stdout, {"checked": <pods>, "violations":
// [{"pod", "namespace", "level", "version", "reasons": [{"reason", "detail"}]}], "warnings": [...]},
// the enforced level's failures in violations, the warned level's in warnings, the reasons in the
// library's words, and exits 0 when no pod falls short of its enforced level, 1 when some do, 2 on
// input it cannot read (a pod in a namespace not listed, an unknown field, a bad label).
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

type pod struct {
	Name      string            `json:"name"`
	Namespace string            `json:"namespace"`
	Metadata  metav1.ObjectMeta `json:"metadata"`
	Spec      corev1.PodSpec    `json:"spec"`
}

type input struct {
	Namespaces map[string]map[string]string `json:"namespaces"`
	Pods       []pod                        `json:"pods"`
}

type reason struct {
	Reason string `json:"reason"`
	Detail string `json:"detail"`
}

type violation struct {
	Pod       string   `json:"pod"`
	Namespace string   `json:"namespace"`
	Level     string   `json:"level"`
	Version   string   `json:"version"`
	Reasons   []reason `json:"reasons"`
}

type output struct {
	Checked    int         `json:"checked"`
	Violations []violation `json:"violations"`
	Warnings   []violation `json:"warnings"`
}

// The API server's defaults for a namespace without labels (its admission configuration's).
var defaults = api.Policy{
	Enforce: api.LevelVersion{Level: api.LevelPrivileged, Version: api.LatestVersion()},
	Audit:   api.LevelVersion{Level: api.LevelPrivileged, Version: api.LatestVersion()},
	Warn:    api.LevelVersion{Level: api.LevelPrivileged, Version: api.LatestVersion()},
}

func read(r io.Reader) (input, error) {
	var in input
	decoder := json.NewDecoder(r)
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(&in); err != nil {
		return in, fmt.Errorf("reading the pods: %w", err)
	}
	return in, nil
}

func policies(namespaces map[string]map[string]string) (map[string]api.Policy, error) {
	found := make(map[string]api.Policy, len(namespaces))
	for name, labels := range namespaces {
		p, errs := api.PolicyToEvaluate(labels, defaults)
		if len(errs) > 0 {
			return nil, fmt.Errorf("namespace %s: %v", name, errs.ToAggregate())
		}
		found[name] = p
	}
	return found, nil
}

// evaluate is the pod's failures at one level and version, or nil.
func evaluate(evaluator policy.Evaluator, lv api.LevelVersion, p *pod) *violation {
	var reasons []reason
	for _, result := range evaluator.EvaluatePod(lv, &p.Metadata, &p.Spec) {
		if !result.Allowed {
			reasons = append(reasons, reason{result.ForbiddenReason, result.ForbiddenDetail})
		}
	}
	if len(reasons) == 0 {
		return nil
	}
	return &violation{p.Name, p.Namespace, string(lv.Level), lv.Version.String(), reasons}
}

func check(in input) (output, error) {
	evaluator, err := policy.NewEvaluator(policy.DefaultChecks())
	if err != nil {
		return output{}, err
	}
	found, err := policies(in.Namespaces)
	if err != nil {
		return output{}, err
	}
	out := output{Checked: len(in.Pods), Violations: []violation{}, Warnings: []violation{}}
	for i := range in.Pods {
		p := &in.Pods[i]
		levels, ok := found[p.Namespace]
		if !ok {
			return output{}, fmt.Errorf("pod %s: namespace %q is not among the namespaces given", p.Name, p.Namespace)
		}
		if v := evaluate(evaluator, levels.Enforce, p); v != nil {
			out.Violations = append(out.Violations, *v)
		}
		if levels.Warn != levels.Enforce {
			if v := evaluate(evaluator, levels.Warn, p); v != nil {
				out.Warnings = append(out.Warnings, *v)
			}
		}
	}
	return out, nil
}

func main() {
	in, err := read(os.Stdin)
	if err == nil {
		var out output
		out, err = check(in)
		if err == nil {
			encoder := json.NewEncoder(os.Stdout)
			encoder.SetIndent("", "  ")
			if err = encoder.Encode(out); err == nil {
				if len(out.Violations) > 0 {
					os.Exit(1)
				}
				return
			}
		}
	}
	fmt.Fprintln(os.Stderr, "pod-security:", err)
	os.Exit(2)
}
