package main

import (
	"embed"
	"fmt"
	"strings"
	"text/template"

	"github.com/lockstep-sandbox/lockstep/enforcer"
	"github.com/lockstep-sandbox/lockstep/harness"
	"github.com/lockstep-sandbox/lockstep/internal/machine"
)

// The verbs' help texts are text files beside the code: help/<verb>.txt is
// the verb's Long text, a text/template given the values it names, and
// help/<verb>.example.txt its Example.
//
//go:embed help/*.txt
var helpFiles embed.FS

// help is the Long text of verb, executed with data.
func help(verb string, data any) string {
	t := template.Must(template.New(verb).Parse(helpFile(verb + ".txt")))
	var b strings.Builder
	if err := t.Execute(&b, data); err != nil {
		panic(fmt.Sprintf("lockstep: help/%s.txt: %v", verb, err))
	}
	return b.String()
}

// example is the Example text of verb.
func example(verb string) string { return helpFile(verb + ".example.txt") }

func helpFile(name string) string {
	b, err := helpFiles.ReadFile("help/" + name)
	if err != nil {
		panic("lockstep: " + err.Error())
	}
	return string(b)
}

// bootHelp is what help/boot.txt names: the CPU models and the deadlines.
func bootHelp() map[string]string {
	return map[string]string{
		"CPUModels": strings.Join(harness.KVMCPUModels, ", "),
		"BootKVM":   fmt.Sprint(harness.BootDeadlines[harness.AccelKVM]), "BootTCG": fmt.Sprint(harness.BootDeadlines[harness.AccelTCG]),
		"ShutdownKVM": fmt.Sprint(harness.ShutdownDeadlines[harness.AccelKVM]), "ShutdownTCG": fmt.Sprint(harness.ShutdownDeadlines[harness.AccelTCG]),
	}
}

// probeHelp is what help/probe.txt names: the schema of probe --json.
func probeHelp() map[string]int { return map[string]int{"Schema": machine.SchemaVersion} }

// runHelp is what help/run.txt names: the variables a command keeps.
func runHelp() map[string]string {
	return map[string]string{"SafeEnv": strings.Join(enforcer.SafeEnv, " ")}
}
