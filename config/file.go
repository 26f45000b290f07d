package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
	"gopkg.in/yaml.v3"
)

// fileValue is one value of a YAML or TOML config file.
type fileValue interface {
	entries() ([]fileEntry, error) // a table's entries; an error if v is not a table
	items() ([]fileValue, error)   // a list's items; an error if v is not a list
	decode(dst any) error          // a scalar into *string, *int, *bool or *Duration
}

type fileEntry struct {
	key string
	val fileValue
}

var (
	errNotTable = errors.New("want a table of keys and values")
	errNotList  = errors.New("want a list")
)

// parseYAML reads one YAML document; an empty file is an empty table.
func parseYAML(data []byte) (fileValue, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err == io.EOF {
		return yamlValue{&yaml.Node{Kind: yaml.MappingNode}}, nil
	} else if err != nil {
		return nil, err
	}
	var next yaml.Node
	if err := dec.Decode(&next); err == nil {
		return nil, errors.New("yaml: more than one document")
	} else if err != io.EOF {
		return nil, err
	}
	return yamlValue{&doc}, nil
}

type yamlValue struct{ n *yaml.Node }

// node looks through documents and aliases.
func (v yamlValue) node() *yaml.Node {
	n := v.n
	for i := 0; i < 8 && n != nil; i++ { // bounded: an alias names a node, which is no alias
		switch {
		case n.Kind == yaml.DocumentNode && len(n.Content) == 1:
			n = n.Content[0]
		case n.Kind == yaml.AliasNode && n.Alias != nil:
			n = n.Alias
		default:
			return n
		}
	}
	return n
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

func (v yamlValue) entries() ([]fileEntry, error) {
	n := v.node()
	if isNull(n) {
		return nil, nil
	}
	if n.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: %w", n.Line, errNotTable)
	}
	out := make([]fileEntry, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := yamlValue{n.Content[i]}.node()
		if k.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("line %d: keys must be strings", k.Line)
		}
		out = append(out, fileEntry{k.Value, yamlValue{n.Content[i+1]}})
	}
	return out, nil
}

func (v yamlValue) items() ([]fileValue, error) {
	n := v.node()
	if isNull(n) {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("line %d: %w", n.Line, errNotList)
	}
	out := make([]fileValue, len(n.Content))
	for i, c := range n.Content {
		out[i] = yamlValue{c}
	}
	return out, nil
}

func (v yamlValue) decode(dst any) error {
	n := v.node()
	err := n.Decode(dst)
	var te *yaml.TypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &te):
		return errors.New(strings.Join(te.Errors, "; "))
	}
	return fmt.Errorf("line %d: %v", n.Line, err)
}

// parseTOML reads a TOML document.
func parseTOML(data []byte) (fileValue, error) {
	var root toml.Primitive
	md, err := toml.Decode(string(data), &root)
	if err != nil {
		return nil, err
	}
	return tomlValue{&md, root}, nil
}

type tomlValue struct {
	md *toml.MetaData
	p  toml.Primitive
}

func (v tomlValue) entries() ([]fileEntry, error) {
	// Look first: toml decodes a non-table into a map as an empty map, without an error.
	var raw any
	if err := v.md.PrimitiveDecode(v.p, &raw); err != nil {
		return nil, err
	}
	if _, ok := raw.(map[string]any); !ok {
		return nil, errNotTable
	}
	var m map[string]toml.Primitive
	if err := v.md.PrimitiveDecode(v.p, &m); err != nil {
		return nil, err
	}
	out := make([]fileEntry, 0, len(m))
	for k, p := range m {
		out = append(out, fileEntry{k, tomlValue{v.md, p}})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out, nil
}

func (v tomlValue) items() ([]fileValue, error) {
	var s []toml.Primitive
	if err := v.md.PrimitiveDecode(v.p, &s); err != nil {
		return nil, errNotList
	}
	out := make([]fileValue, len(s))
	for i, p := range s {
		out[i] = tomlValue{v.md, p}
	}
	return out, nil
}

func (v tomlValue) decode(dst any) error {
	if err := v.md.PrimitiveDecode(v.p, dst); err != nil {
		return errors.New(tomlNoise.ReplaceAllString(err.Error(), ""))
	}
	return nil
}

// tomlNoise is what TOML errors say that ours already say: the package and the key.
var tomlNoise = regexp.MustCompile(`^toml: | \(last key "[^"]*"\)`)
