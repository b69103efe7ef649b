// Package kafkaretry gives a Kafka consumer non-blocking retries: a record
// whose handler fails is moved to a retry topic with its retry state in
// headers, handled again once it is due, and moved to a dead-letter topic when
// it runs out of attempts or fails for good. Nothing sleeps in memory, no
// partition waits behind a failing record, and nothing is lost on restart.
//
// # Topics
//
// For a main topic T the Processor uses T-retry (or tiers T-retry-1 …
// T-retry-N, see Config.Tiers) and T-dlq, and creates those missing with the
// main topic's partition count (Config.Partitions overrides it). The main
// consumer group is Config.Group; the retry topics are consumed by the group
// Config.Group+"-retry".
//
// # Attempts and delays
//
// Policy.MaxAttempts counts every handling, the first (on T) included. What
// follows a failed attempt is decided by the core's decision step,
// retry.Policy.Decide, so a record is retried exactly as retry.Do would retry
// the same call. After attempt n fails with an error the Policy retries (the
// core's classification: retry.Permanent, the Policy's Classifier, an
// error's own Retryable() or HTTPStatusCode()), the record is produced to a
// retry topic to be handled again, as attempt n+1, no earlier than
//
//	now + Policy.Backoff.Delay(n, prev, Policy.Rand)
//
// where prev is the previous delay, carried in x-retry-prev-delay-ms so that
// decorrelated jitter keeps its per-record state across hops. A Retry-After
// hint on the error (retry.After) is a floor on the delay, even beyond
// Backoff.Max; without a Budget it is capped at Policy.MaxRetryAfter
// (retry.DefaultMaxRetryAfter when 0). With a Policy.Budget, counted from
// x-first-attempt-timestamp, a retry whose delay plus the expected call time
// (Policy.CallTime, else this attempt's) would overrun it goes to the DLQ
// instead; with a Policy.Quota, each retry takes from it and an empty quota
// sends the record to the DLQ. A record goes to T-dlq when the error is not
// retried, when attempt MaxAttempts failed, or when budget or quota say
// stop; x-dlq-reason says which, in the words of the core's sentinel errors
// ("attempts exhausted", "error not retryable", …).
//
// With Config.Tiers = [d1, …, dN], retry n goes to tier k = min(n, N), topic
// T-retry-k, with the fixed delay dk (no jitter): attempt 1 on T, attempt 2
// from T-retry-1 after d1, attempt 3 from T-retry-2 after d2, and every later
// attempt from T-retry-N after dN, until MaxAttempts. Policy.Backoff is not
// used then. Because each tier has one delay, records in a tier partition
// become due in offset order, so none waits behind a later one.
//
// # Headers
//
// A retry or DLQ record keeps the key, the value and the user's headers (in
// their order) and carries, once each:
//
//	x-retry-attempt            attempts made so far (1 after the first failure)
//	x-process-after            epoch ms before which it is not handled (retry only)
//	x-retry-prev-delay-ms      the backoff delay chosen, for decorrelated jitter (retry only)
//	x-original-topic           where the record was first consumed
//	x-original-partition       …
//	x-original-offset          …
//	x-first-attempt-timestamp  epoch ms of attempt 1
//	x-last-error-type          the Go type of the innermost error, e.g. *kafkaretry.HTTPError
//	x-last-error-message       the error's text, cut to MaxErrorBytes
//	x-api-status-code          the HTTP status, when the error carries one (HTTPStatusCode() int)
//	x-api-response             the response body, when the error carries one (ResponseBody() []byte), cut to MaxErrorBytes
//	x-retry-history            JSON list of the last MaxHistory failures: attempt, time, topic, type, message, status
//	x-dlq-reason               why it was dead-lettered (DLQ only)
//
// Headers with these names that a record already has are replaced, never
// repeated. ReadState parses them; State.Headers writes them.
//
// # Bad headers
//
// A record in a retry topic whose headers are missing or malformed is still
// handled, never dropped, and the decision is logged at Warn:
//
//   - x-retry-attempt missing, not a number, negative or too large for an int
//     counts as 1 (the record is in a retry topic, so attempt 1 failed); a
//     value of MaxAttempts or more counts as MaxAttempts−1, so the record gets
//     one last attempt.
//   - x-process-after missing, not a number or negative means due now; a time
//     more than Config.MaxHold ahead is held for MaxHold only.
//   - x-first-attempt-timestamp missing or bad is the record's timestamp;
//     x-retry-prev-delay-ms bad is 0; a bad x-retry-history starts a new one;
//     other bad numbers read as absent.
//   - When a header appears twice, the last one counts.
//
// # Holding records without blocking
//
// The retry consumer handles the records of each partition in offset order.
// When the head of a partition is not due, the partition is paused
// (kgo.Client.PauseFetchPartitions) and its fetched records are held in
// memory; one timer for the whole consumer wakes the poll loop when the
// earliest held head is due, and the partition is resumed once its held
// records are handled. Other partitions, and the main topic, keep flowing. A
// record behind a later-due head in the same partition waits for that head:
// use tiers to avoid it. A record is never handled before its
// x-process-after; it is late by the time the handlers of records ahead of it
// take, plus, when it was not fetched yet because its partition was paused,
// up to RetryFetchMaxWait. Records are held in memory only: after a restart
// or a rebalance they are fetched again from the committed offset.
//
// # Delivery
//
// At least once. An offset is committed only after the record was handled
// successfully or its retry or DLQ copy was acknowledged by the brokers. A
// failed forward commits nothing: it is retried in place with
// Config.ProducePolicy's backoff, which blocks that consumer (not the other
// one) until Kafka accepts the record or Run's context ends. On a rebalance,
// revoked partitions are committed up to the last record done, their held
// records are dropped (the new owner fetches them again from the committed
// offset) and their pauses are cleared.
//
// # Metrics
//
// Fed by the events Policy.Observer hears (see Config.Policy), and
// registered on Config.Registerer, labelled with the main topic:
// kafkaretry_records_retried_total{retry_topic},
// kafkaretry_records_dead_lettered_total{reason},
// kafkaretry_delay_accuracy_seconds (handling time minus x-process-after) and
// kafkaretry_held_records.
package kafkaretry
