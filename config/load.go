package config

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Load builds the configuration of `herald serve`: defaults, then the file named by
// --config or HERALD_CONFIG (YAML for .yaml/.yml, TOML for .toml), then environment
// variables, then flags. args excludes the program name and subcommand; env is os.Getenv in
// production, and an empty value counts as unset. The result is validated once: the error
// lists every problem, each naming the field and where its value came from. With -h it prints
// usage to stderr and returns flag.ErrHelp. check makes the checks only the runtime packages
// can make.
func Load(args []string, env func(string) string, check Checks) (Config, error) {
	return loadTo(args, env, os.Stderr, check)
}

func loadTo(args []string, env func(string) string, out io.Writer, check Checks) (Config, error) {
	flags, err := parseFlags(args, out)
	if err != nil {
		return Config{}, err
	}
	l := &loader{cfg: defaultConfig(), from: map[string]string{}, failed: map[string]bool{}, fileApps: -1, check: check}
	if v, ok := flags["config"]; ok {
		if v != "" { // --config "" means no file, whatever HERALD_CONFIG says
			l.loadFile(v, "flag --config")
		}
	} else if v := env("HERALD_CONFIG"); v != "" {
		l.loadFile(v, "env HERALD_CONFIG")
	}
	for _, s := range settings {
		if v := env(s.env()); v != "" {
			l.set(s, v, "env "+s.env())
		}
	}
	if v := env(storeHistoryEnv); v != "" {
		l.storeHistoryText(v, "env "+storeHistoryEnv)
	}
	l.setSecretFiles(flags, env, false)
	for _, s := range settings {
		if v, ok := flags[s.flag()]; ok {
			l.set(s, v, "flag --"+s.flag())
		}
	}
	if v, ok := flags[storeHistoryFlag]; ok {
		l.storeHistoryText(v, "flag --"+storeHistoryFlag)
	}
	l.setSecretFiles(flags, env, true)
	l.applyAppCredentials(flags, env)
	l.validate()
	if len(l.problems) > 0 {
		return Config{}, configError(l.problems)
	}
	return l.cfg, nil
}

// configError lists every problem found in one configuration.
type configError []string

func (e configError) Error() string {
	return "invalid configuration:\n  " + strings.Join(e, "\n  ")
}

// loader fills one Config and remembers where each value came from.
type loader struct {
	cfg      Config
	from     map[string]string // field path ("apps[0].key") -> source ("file herald.yaml")
	failed   map[string]bool   // fields whose value could not be read: not validated again
	problems []string
	fileApps int    // apps defined by the file, -1 if it defines none
	check    Checks // the checks only the runtime packages can make
}

// add records a problem with the field at path, whose value came from src.
func (l *loader) add(path, src, format string, args ...any) {
	l.problems = append(l.problems, fmt.Sprintf("%s: %s (%s)", path, fmt.Sprintf(format, args...), describe(src)))
}

// fail records that the value for path in src could not be read. Validation then skips the
// field and everything under it, which still hold an older value.
func (l *loader) fail(path, src string, err error) {
	l.failed[path] = true
	l.add(path, src, "%v", err)
}

// read records that path now holds a value from src.
func (l *loader) read(path, src string) {
	l.from[path] = src
	delete(l.failed, path)
}

func describe(src string) string {
	if src == "" {
		return "default"
	}
	return "from " + src
}

// source tells where the value at path came from: its own record, else its nearest
// recorded parent ("apps[0].limits.max_batch_size" falls back to "apps[0]", then "apps").
func (l *loader) source(path string) string {
	for {
		if src, ok := l.from[path]; ok {
			return src
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			return ""
		}
		path = path[:i]
	}
}

// set parses raw, from the environment or a flag, into the setting.
func (l *loader) set(s setting, raw, src string) {
	var err error
	switch p := s.ref(&l.cfg).(type) {
	case *string:
		*p = raw
	case *int:
		var n int
		if n, err = strconv.Atoi(raw); err != nil {
			err = fmt.Errorf("%q is not an integer", raw)
		} else {
			*p = n
		}
	case *bool:
		var b bool
		if b, err = strconv.ParseBool(raw); err != nil {
			err = fmt.Errorf("%q is not true or false", raw)
		} else {
			*p = b
		}
	case *Duration:
		err = p.UnmarshalText([]byte(raw))
	}
	if err != nil {
		l.fail(s.key, src, err)
		return
	}
	l.read(s.key, src)
}

// applyAppCredentials lets HERALD_APP_ID/KEY/SECRET and --app-id/key/secret replace the one
// app. Credentials they leave unset come from the file's single app, if it has one.
func (l *loader) applyAppCredentials(flags map[string]string, env func(string) string) {
	var vals, srcs [appCredentials]string
	trigger := ""
	for i, f := range appFields[:appCredentials] {
		if v := env(f.env()); v != "" {
			vals[i], srcs[i] = v, "env "+f.env()
		}
		if f.key == appSecretField.key {
			l.appSecretFile(&vals[i], &srcs[i], env(fileVar(f.env())), "env "+fileVar(f.env()), env(f.env()) != "")
		}
		if v, ok := flags[f.flag()]; ok {
			vals[i], srcs[i] = v, "flag --"+f.flag()
		}
		if f.key == appSecretField.key {
			_, plain := flags[f.flag()]
			l.appSecretFile(&vals[i], &srcs[i], flags[fileFlag(f.flag())], "flag --"+fileFlag(f.flag()), plain)
		}
		if trigger == "" {
			trigger = srcs[i]
		}
	}
	if trigger == "" {
		return
	}
	if l.fileApps > 1 {
		l.add("apps", trigger, "HERALD_APP_* and --app-* replace the single app, but %s defines %d apps", l.from["apps"], l.fileApps)
		return
	}
	a := AppConfig{EnableClientMessages: true, EnableUserAuthentication: true}
	if l.fileApps == 1 {
		a = l.cfg.Apps[0]
	} else {
		l.read("apps", trigger)
	}
	for i, f := range appFields[:appCredentials] {
		path := "apps[0]." + f.key
		switch {
		case srcs[i] != "":
			*f.ref(&a).(*string) = vals[i]
			l.read(path, srcs[i])
		case l.fileApps != 1:
			l.from[path] = fmt.Sprintf("%s, which replaces the app; set %s or --%s too", trigger, f.env(), f.flag())
		}
	}
	l.cfg.Apps = []AppConfig{a}
}

// rawFlag keeps a flag's text so that Load parses flags like environment variables and
// reports every bad value, not just the first.
type rawFlag struct{ s string }

func (f *rawFlag) String() string {
	if f == nil {
		return ""
	}
	return f.s
}

func (f *rawFlag) Set(s string) error { f.s = s; return nil }

// boolRawFlag is a rawFlag that may stand alone ("--metrics-enabled" is "--metrics-enabled=true").
type boolRawFlag struct{ rawFlag }

func (f *boolRawFlag) IsBoolFlag() bool { return true }

// parseFlags returns the flags given in args, by name.
func parseFlags(args []string, out io.Writer) (map[string]string, error) {
	fs := flag.NewFlagSet("herald serve", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() { printUsage(fs.Output()) }
	fs.Var(new(rawFlag), "config", "config file")
	var probe Config
	for _, s := range settings {
		if _, ok := s.ref(&probe).(*bool); ok {
			// A bare --metrics-enabled means true, as with any Go boolean flag.
			fs.Var(&boolRawFlag{}, s.flag(), s.usage)
			continue
		}
		fs.Var(new(rawFlag), s.flag(), s.usage)
	}
	for _, f := range appFields[:appCredentials] {
		fs.Var(new(rawFlag), f.flag(), "app "+f.key)
	}
	fs.Var(new(rawFlag), storeHistoryFlag, storeHistoryKey)
	for _, key := range secretKeys {
		s := secretSetting(key)
		fs.Var(new(rawFlag), fileFlag(s.flag()), "file holding "+s.key)
	}
	fs.Var(new(rawFlag), fileFlag(appSecretField.flag()), "file holding the app secret")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	got := map[string]string{}
	fs.Visit(func(f *flag.Flag) { got[f.Name] = f.Value.String() })
	return got, nil
}

func printUsage(w io.Writer) {
	def := defaultConfig()
	fmt.Fprint(w, "Usage: herald serve [flags]\n\n"+
		"Flags override environment variables, which override the config file, which overrides\n"+
		"the defaults. Durations are seconds (\"30\") or Go durations (\"1m30s\").\n\n")
	row := func(flag, kind, env, usage, dflt string) {
		fmt.Fprintf(w, "  --%-33s %s\n", flag+" "+kind, usage)
		if dflt != "" {
			env += ", default " + dflt
		}
		fmt.Fprintf(w, "  %-35s ($%s)\n", "", env)
	}
	row("config", "path", "HERALD_CONFIG", "config file: .yaml, .yml or .toml", "")
	for _, s := range settings {
		kind, dflt := "", ""
		switch p := s.ref(&def).(type) {
		case *string:
			kind, dflt = "string", *p
		case *int:
			kind, dflt = "int", fmt.Sprint(*p)
		case *Duration:
			kind, dflt = "duration", p.String()
		}
		row(s.flag(), kind, s.env(), s.usage, dflt)
	}
	for _, f := range appFields[:appCredentials] {
		row(f.flag(), "string", f.env(), "replaces the single app's "+f.key, "")
	}
	row(storeHistoryFlag, "list", storeHistoryEnv, "history rules for the app store's apps by id: [{apps: \"*\", channels: \"auction-*\", size: 1000, ttl: 10m}]", "")
	for _, key := range secretKeys {
		s := secretSetting(key)
		row(fileFlag(s.flag()), "path", fileVar(s.env()), "file holding "+s.key+" (instead of the value itself)", "")
	}
	row(fileFlag(appSecretField.flag()), "path", fileVar(appSecretField.env()), "file holding the single app's secret", "")
	fmt.Fprint(w, "\nWith no app configured, herald uses the development app app-id/app-key/app-secret.\n")
}

// loadFile reads the config file at path, named by via ("flag --config").
func (l *loader) loadFile(path, via string) {
	var parse func([]byte) (fileValue, error)
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml":
		parse = parseYAML
	case ".toml":
		parse = parseTOML
	default:
		l.fail("config", via, fmt.Errorf("%q must end in .yaml, .yml or .toml", path))
		return
	}
	data, err := os.ReadFile(path)
	if err != nil {
		l.fail("config", via, err)
		return
	}
	src := "file " + path
	root, err := parse(data)
	if err != nil {
		l.fail("config", src, err)
		return
	}

	// Each setting's key is a path of tables ("tls.acme.email" is table tls, table acme, key
	// email); a table's fields are gathered as the settings name them.
	top := map[string]func(fileValue){}
	tables := map[string]map[string]func(fileValue){"": top}
	var fieldsOf func(path string) map[string]func(fileValue)
	fieldsOf = func(path string) map[string]func(fileValue) {
		if f, ok := tables[path]; ok {
			return f
		}
		f := map[string]func(fileValue){}
		tables[path] = f
		parent, name := "", path
		if i := strings.LastIndexByte(path, '.'); i >= 0 {
			parent, name = path[:i], path[i+1:]
		}
		fieldsOf(parent)[name] = func(v fileValue) { l.table(v, path, src, f) }
		return f
	}
	for _, s := range settings {
		path, dst := s.key, s.ref(&l.cfg)
		decode := func(v fileValue) { l.decode(v, path, src, dst) }
		parent, key := "", s.key
		if i := strings.LastIndexByte(s.key, '.'); i >= 0 {
			parent, key = s.key[:i], s.key[i+1:]
		}
		fieldsOf(parent)[key] = decode
	}
	fieldsOf("app_store")["history"] = func(v fileValue) { l.decodeStoreHistory(v, src) }
	top["apps"] = func(v fileValue) { l.decodeApps(v, src) }
	top["ingest"] = func(v fileValue) { l.decodeIngest(v, src) }
	l.table(root, "", src, top)
}

func (l *loader) decodeApps(v fileValue, src string) {
	items, err := v.items()
	if err != nil {
		l.fail("apps", src, err)
		return
	}
	l.read("apps", src)
	l.fileApps = len(items)
	l.cfg.Apps = make([]AppConfig, len(items))
	for i, item := range items {
		app := &l.cfg.Apps[i]
		prefix := fmt.Sprintf("apps[%d]", i)
		fields := map[string]func(fileValue){}
		for _, f := range appFields {
			fields[f.key] = func(v fileValue) { l.decode(v, prefix+"."+f.key, src, f.ref(app)) }
		}
		limits := map[string]func(fileValue){}
		for _, f := range limitFields {
			limits[f.key] = func(v fileValue) { l.decode(v, prefix+".limits."+f.key, src, f.ref(&app.Limits)) }
		}
		fields["limits"] = func(v fileValue) { l.table(v, prefix+".limits", src, limits) }
		fields["webhooks"] = func(v fileValue) { l.decodeWebhooks(v, prefix, src, app) }
		fields["history"] = func(v fileValue) { l.decodeHistory(v, prefix, src, app) }
		l.table(item, prefix, src, fields)
	}
}

// table hands each entry of the table v to its field's decoder; unknown and repeated keys
// are problems.
func (l *loader) table(v fileValue, path, src string, fields map[string]func(fileValue)) {
	entries, err := v.entries()
	if err != nil {
		if path == "" {
			path = "config"
		}
		l.fail(path, src, err)
		return
	}
	seen := map[string]bool{}
	for _, e := range entries {
		p := e.key
		if path != "" {
			p = path + "." + e.key
		}
		decode, ok := fields[e.key]
		switch {
		case seen[e.key]:
			l.add(p, src, "key appears more than once")
		case !ok:
			l.add(p, src, "unknown key")
		default:
			decode(e.val)
		}
		seen[e.key] = true
	}
}

// scalars returns the decoders of a table's scalar keys: each reads its value into dsts[key],
// the field at path.key.
func (l *loader) scalars(path, src string, dsts map[string]any) map[string]func(fileValue) {
	fields := make(map[string]func(fileValue), len(dsts))
	for key, dst := range dsts {
		fields[key] = func(v fileValue) { l.decode(v, path+"."+key, src, dst) }
	}
	return fields
}

// scalarTable reads the table v at path, whose keys are all scalars: each into dsts[key].
func (l *loader) scalarTable(v fileValue, path, src string, dsts map[string]any) {
	l.read(path, src)
	l.table(v, path, src, l.scalars(path, src, dsts))
}

// decode reads the scalar v into dst, the field at path.
func (l *loader) decode(v fileValue, path, src string, dst any) {
	if err := v.decode(dst); err != nil {
		l.fail(path, src, err)
		return
	}
	l.read(path, src)
}
