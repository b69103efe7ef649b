package cli

import (
	"context"
	"flag"
	"strings"
)

// command is one "group verb" of retryctl. The help text is made from it
// and from the flags it registers, so that usage cannot drift from them.
type command struct {
	group, verb string
	// positional names the arguments, in order; a name in brackets
	// ("[TASK_ID]") may be left out.
	positional []string
	summary    string   // one line, for the command lists
	forms      []string // the usage lines after "retryctl group verb"
	details    string   // more about the command, for its --help
	// standalone commands talk to something other than retryd: they take
	// no global flags and get no client.
	standalone bool
	flags      func(fs *flag.FlagSet) func(ctx context.Context, r *runner, args []string) error
}

func (c *command) name() string { return c.group + " " + c.verb }

// argCounts returns how many positional arguments c takes at least and at
// most.
func (c *command) argCounts() (lo, hi int) {
	for _, p := range c.positional {
		if !strings.HasPrefix(p, "[") {
			lo++
		}
	}
	return lo, len(c.positional)
}

func commands() []command {
	return []command{
		{
			group: "tasks", verb: "submit",
			summary: "submit a task, or a JSON Lines file of them",
			forms: []string{
				"(--target URL | --destination ID [--path PATH])\n" +
					"    [--policy ID] [--method M] [-H 'Name: value']...\n" +
					"    [--body TEXT | --body-file FILE|- | --body-ref s3://BUCKET/KEY]\n" +
					"    [--idempotency-key KEY] [--not-before TIME]",
				"--file TASKS.jsonl|-",
			},
			details: "Without --policy the task runs under the built-in policy \"default\".\n" +
				"--destination sends the task to a destination's url followed by --path, as the\n" +
				"destination is at each attempt (or to --target, when it is a URL under it).\n" +
				"--not-before holds the first attempt until TIME: RFC 3339, epoch milliseconds,\n" +
				"or a duration from now (90s, 2h).\n" +
				"--file takes one task object per line, as POST /retry-tasks takes it, and sends\n" +
				"them 1,000 at a time; it prints what was created, repeated and refused (each\n" +
				"refused line with its error) and exits 1 if any was refused.",
			flags: submitFlags,
		},
		{
			group: "tasks", verb: "get", positional: []string{"TASK_ID"},
			summary: "show a task",
			forms:   []string{"TASK_ID"},
			flags:   noFlags(taskGet),
		},
		{
			group: "tasks", verb: "list",
			summary: "list tasks, newest first",
			forms: []string{"[--status S[,S…]] [--policy ID] [--target-host H[:P] | --destination ID]\n" +
				"    [--idempotency-key KEY] [--cause C] [--limit N] [--page-token T]"},
			flags: taskListFlags,
		},
		{
			group: "tasks", verb: "watch", positional: []string{"TASK_ID"},
			summary: "follow a task until it ends: each attempt and state change as it happens",
			forms:   []string{"TASK_ID [--interval D]"},
			details: "Prints each attempt as it is logged and each change of state, then the final\n" +
				"state. Exits 0 when the task SUCCEEDED, 1 when it ended otherwise (EXHAUSTED,\n" +
				"FAILED, CANCELLED) or the watch was stopped. A retryd out of reach for a while\n" +
				"is told on stderr and the watch goes on. With --json, one JSON object a line\n" +
				"per event: {\"event\":\"attempt\",\"attempt\":…}, {\"event\":\"state\",\"task\":…},\n" +
				"{\"event\":\"end\",\"task\":…}.",
			flags: watchFlags,
		},
		{
			group: "tasks", verb: "cancel", positional: []string{"[TASK_ID]"},
			summary: "cancel a PENDING task or dismiss a dead letter, or every one a filter names",
			forms: []string{"TASK_ID",
				"[--status S[,S…]] [--policy ID] [--target-host H[:P]]",
				"--all"},
			details: "Without TASK_ID, cancels every task matching all the filters given, reporting\n" +
				"progress on stderr and the total at the end; --all, with no filter, cancels\n" +
				"every PENDING task. --status EXHAUSTED,FAILED dismisses dead letters (only when\n" +
				"named). With no TASK_ID, filter or --all, nothing is cancelled.",
			flags: taskCancelFlags,
		},
		{
			group: "tasks", verb: "attempts", positional: []string{"TASK_ID"},
			summary: "show a task's attempt log, oldest first",
			forms:   []string{"TASK_ID [--limit N] [--page-token T]"},
			flags:   attemptsFlags,
		},
		{
			group: "policies", verb: "put", positional: []string{"POLICY_ID"},
			summary: "register a policy (policies are immutable)",
			forms:   []string{"POLICY_ID [--spec JSON | --file FILE|-]"},
			details: "Without --spec or --file the policy takes every default.",
			flags:   policyPutFlags,
		},
		{
			group: "policies", verb: "get", positional: []string{"POLICY_ID"},
			summary: "show a policy",
			forms:   []string{"POLICY_ID"},
			flags:   noFlags(policyGet),
		},
		{
			group: "policies", verb: "list",
			summary: "list policies by ID",
			forms:   []string{"[--limit N] [--page-token T]"},
			flags:   policyListFlags,
		},
		{
			group: "policies", verb: "preview", positional: []string{"[POLICY_ID]"},
			summary: "show the delays a policy makes, as percentiles per attempt, before using it",
			forms:   []string{"POLICY_ID [--samples N]", "--spec JSON | --file FILE|- [--samples N]"},
			details: "retryd runs its decision engine on the policy many times over (jitter makes\n" +
				"each run differ) and reports, for each attempt, the wait before it and the\n" +
				"time waited in all (p5, p50, p95), the share of runs that reach it (below\n" +
				"100% when the time budget cuts some short), and the budget.",
			flags: previewFlags,
		},
		{
			group: "destinations", verb: "put", positional: []string{"DESTINATION_ID"},
			summary: "create a destination: a named target that tasks send to by path",
			forms:   []string{"DESTINATION_ID (--spec JSON | --file FILE|-)"},
			details: "The JSON is a destination as POST /destinations takes it: url, and optionally\n" +
				"auth, headers, signing, rateLimit, maxInFlight, timeoutMs, tls, autoDisable, status;\n" +
				"secrets as strings. With signing but no signing.secret, retryd makes one and this\n" +
				"prints it once: nothing shows it again. Putting the same settings again changes\n" +
				"nothing; other settings for an existing ID are refused: use destinations patch.",
			flags: destinationPutFlags,
		},
		{
			group: "destinations", verb: "get", positional: []string{"DESTINATION_ID"},
			summary: "show a destination (its secrets as set or not, never their values)",
			forms:   []string{"DESTINATION_ID"},
			flags:   noFlags(destinationGet),
		},
		{
			group: "destinations", verb: "list",
			summary: "list destinations by ID",
			forms:   []string{"[--limit N] [--page-token T]"},
			flags:   destinationListFlags,
		},
		{
			group: "destinations", verb: "patch", positional: []string{"DESTINATION_ID"},
			summary: "change a destination by a JSON merge patch",
			forms:   []string{"DESTINATION_ID (--spec JSON | --file FILE|-) [--version N]"},
			details: "A JSON merge patch (RFC 7386): the members given replace those of the\n" +
				"destination, null removes one ('{\"rateLimit\":null}'). A secret given as a\n" +
				"string replaces the one stored; {\"set\":true}, as get --json prints it, keeps it.\n" +
				"--version makes the change only if no one changed the destination since that\n" +
				"version; otherwise it is refused (409) and nothing changes.",
			flags: destinationPatchFlags,
		},
		{
			group: "destinations", verb: "pause", positional: []string{"DESTINATION_ID"},
			summary: "hold a destination's attempts, uncharged, until it is resumed",
			forms:   []string{"DESTINATION_ID [--reason TEXT]"},
			flags:   destinationStatusFlags(true),
		},
		{
			group: "destinations", verb: "resume", positional: []string{"DESTINATION_ID"},
			summary: "make a paused or disabled destination ACTIVE again",
			forms:   []string{"DESTINATION_ID [--reason TEXT]"},
			flags:   destinationStatusFlags(false),
		},
		{
			group: "destinations", verb: "rotate-secret", positional: []string{"DESTINATION_ID"},
			summary: "give a destination a new signing secret, printed once",
			forms:   []string{"DESTINATION_ID [--overlap D]"},
			details: "retryd makes the new secret; this prints it once, and nothing shows it again.\n" +
				"The secret it replaces goes on signing beside it for --overlap, so that\n" +
				"receivers can take the new one without refusing a request meanwhile.",
			flags: destinationRotateFlags,
		},
		{
			group: "destinations", verb: "delete", positional: []string{"DESTINATION_ID"},
			summary: "delete a destination that no PENDING or IN_FLIGHT task names",
			forms:   []string{"DESTINATION_ID"},
			details: "Refused while live tasks name the destination: cancel them first\n" +
				"(tasks list --destination ID --status PENDING lists them).",
			flags: noFlags(destinationDelete),
		},
		{
			group: "dead-letters", verb: "list",
			summary: "list EXHAUSTED and FAILED tasks, newest first",
			forms:   []string{"[--policy ID] [--limit N] [--page-token T]"},
			flags:   deadLetterListFlags,
		},
		{
			group: "dead-letters", verb: "causes",
			summary: "count the dead letters by cause, with when each was first and last seen",
			forms:   []string{"[--policy ID]"},
			details: "A cause is a response status (\"HTTP 503\") or a kind of error (timeout,\n" +
				"\"connection refused\", DNS, TLS, …); pass it to dead-letters redrive --cause or\n" +
				"tasks list --cause.",
			flags: causesFlags,
		},
		{
			group: "dead-letters", verb: "redrive", positional: []string{"[TASK_ID]"},
			summary: "run a dead-lettered task again (same idempotency key), or every one a filter names",
			forms: []string{"TASK_ID",
				"[--cause C] [--status S[,S…]] [--policy ID] [--target-host H[:P]]",
				"--all"},
			details: "Without TASK_ID, redrives every dead letter matching all the filters given,\n" +
				"reporting progress on stderr and the total at the end; --all, with no filter,\n" +
				"redrives every dead letter.",
			flags: redriveFlags,
		},
		{
			group: "kafka", verb: "replay", standalone: true,
			summary: "republish a Kafka consumer's dead letters (T-dlq)",
			forms: []string{"--topic T [--brokers H:P,…] [--to main|retry] [--tiers N] [--naming default|spring]\n" +
				"    [--from DLQ] [--since T] [--until T] [--error-type TYPE] [--dry-run] [--timeout D]"},
			details: "Talks to the Kafka brokers, not to retryd: the global flags do not apply.\n" +
				"Reads committed records only. Copies of one failure (the same x-record-id: the\n" +
				"original record's topic, partition and offset) are replayed once per run.",
			flags: kafkaReplayFlags,
		},
	}
}

// findCommand returns the command group verb, nil when there is none.
func findCommand(group, verb string) *command {
	for _, c := range commands() {
		if c.group == group && c.verb == verb {
			return &c
		}
	}
	return nil
}

// groupCommands returns the commands of group, none when it is no group.
func groupCommands(group string) []command {
	var cs []command
	for _, c := range commands() {
		if c.group == group {
			cs = append(cs, c)
		}
	}
	return cs
}

func noFlags(run func(ctx context.Context, r *runner, args []string) error) func(*flag.FlagSet) func(context.Context, *runner, []string) error {
	return func(*flag.FlagSet) func(context.Context, *runner, []string) error { return run }
}
