package harness

// Scenario files: every *.yaml of a directory, decoded into its harness's Scenario type.

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// LoadScenarios decodes every *.yaml of dir, sorted by name, into a fresh S (strictly: a key S
// does not have is an error), then calls check with it, its path and its name (the file name
// without .yaml). An error is reported with the file's path.
func LoadScenarios[S any](dir string, check func(s *S, file, name string) error) ([]*S, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var out []*S
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		s := new(S)
		if err := yaml.UnmarshalStrict(data, s); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if err := check(s, file, strings.TrimSuffix(filepath.Base(file), ".yaml")); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// PolicyTexts is policies (file name -> text) with the text of each of files (paths relative to
// the repository) added under its base name: what a scenario's service serves.
func PolicyTexts(repo string, policies map[string]string, files []string) (map[string]string, error) {
	out := map[string]string{}
	for name, text := range policies {
		out[name] = text
	}
	for _, file := range files {
		text, err := os.ReadFile(filepath.Join(repo, file))
		if err != nil {
			return nil, fmt.Errorf("policyFiles: %w", err)
		}
		name := filepath.Base(file)
		if _, taken := out[name]; taken {
			return nil, fmt.Errorf("policyFiles: %s is also in policies", name)
		}
		out[name] = string(text)
	}
	return out, nil
}
