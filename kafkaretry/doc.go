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
// Config.Group+"-retry". Config.RetrySuffix and DLQSuffix change the
// suffixes; Config.Naming = NamingSpring uses Spring Kafka's names and
// headers (see "Sharing topics with Spring Kafka").
//
// A record that runs out of attempts goes to the default dead-letter topic,
// or to the one Config.DeadLetterTopic chooses from its final error (say
// T-dlq-validation for errors no retry will fix), as Spring's DLT resolver
// allows; Run creates the topics listed in Config.DeadLetterTopics.
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
//	x-last-error-type          the error's class: the Code() of the first error in its chain
//	                           with one (see Coder), else the Go type of the innermost error,
//	                           e.g. *kafkaretry.HTTPError
//	x-last-error-message       the error's text, cut to MaxErrorBytes
//	x-api-status-code          the HTTP status, when the error carries one (HTTPStatusCode() int)
//	x-api-response             the response body, when the error carries one (ResponseBody() []byte), cut to MaxErrorBytes
//	x-retry-history            JSON list of the last MaxHistory failures: attempt, time, topic, type, message, status
//	x-dlq-reason               why it was dead-lettered (DLQ only)
//	x-replays                  times Replay republished the chain, when not 0
//	x-record-id                the record's identity, "T/partition/offset" (with "/rN" after N
//	                           replays) of the original record: see "Delivery"
//
// Headers with these names that a record already has are replaced, never
// repeated, and so are Spring Kafka's (retry_topic-…, kafka_dlt-…,
// kafka_original-…, kafka_exception-…), which describe an older attempt
// once the record moves on. ReadState parses them; State.Headers writes
// them. No other header is touched: the trace context (traceparent,
// tracestate, baggage) travels unchanged, see Tracing.
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
// A record is never lost: its offset is committed only after it was handled
// successfully or its retry or DLQ copy was acknowledged by the brokers.
// What a crash (kill -9, a lost host) can repeat depends on the mode,
// Config.Transactions:
//
//   - With transactions (TxnAuto, the default, on brokers with KIP-447,
//     Kafka 2.5+; or TxnOn), each consumer produces its forwards and commits
//     its offsets in one Kafka transaction (franz-go's GroupTransactSession),
//     committed every Config.CommitInterval and at the end of each poll. A
//     crash aborts the open transaction: its forwards are discarded and its
//     records handled again by the next owner. A crash can run a Handler
//     again, for the records of the open transaction, but it can never make
//     a second retry or DLQ copy of a record: exactly-once forwarding. The
//     retry consumers, Replay and anyone reading a retry or dead-letter
//     topic must read committed records only
//     (kgo.FetchIsolationLevel(kgo.ReadCommitted())), or they see the
//     forwards of aborted transactions.
//   - Without transactions (TxnOff, or brokers without them), a forwarded
//     record's offset is committed as soon as its copy is acknowledged, and
//     a successful one's within CommitInterval. A crash runs again the
//     records handled since the last commit, and forwards a second copy
//     only of a record in flight: at most one per consumer (main and retry)
//     per crash. Such a copy starts a second chain, which can repeat that
//     record's later forwards.
//
// Measured by TestKill9 (go test -run TestKill9 -v ./kafkaretry): a
// consumer process killed with SIGKILL at 20 random points while handling
// records (5 ms each), on kfake: 240 records, 60 of which end in the DLQ,
// 420 handlings without a crash. Over 12 runs, with transactions: 0
// duplicate retry and 0 duplicate DLQ records, 0 lost, 22–86 handlings run
// again. Without: 0 lost, 0–3 duplicate retry and 0–3 duplicate DLQ
// records, 4–18 handlings run again.
//
// Every retry and DLQ copy carries the identity of its chain: the original
// record's topic, partition and offset, and the replays so far (RecordID;
// x-record-id). Two records with the same identity are copies of one
// failure, so a consumer of a dead-letter topic that must not act twice
// dedupes on x-record-id; Replay republishes each identity once per run.
//
// A failed forward commits nothing. Without transactions it is retried in
// place with Config.ProducePolicy's backoff, which blocks that consumer (not
// the other one) until Kafka accepts the record or Run's context ends. With
// transactions the transaction is aborted instead, and its records are
// handled again after ProducePolicy's delay. If ProducePolicy gives up, Run
// returns the error. Metrics, Policy.Observer and the logs hear of a
// retry or dead letter once its copy is acknowledged; with transactions, a
// handling whose transaction then aborts is heard again when it runs again.
// On a rebalance, revoked partitions are committed up to
// the last record done (a transaction ends before the rebalance goes on),
// their held records are dropped (the new owner fetches them again from the
// committed offset) and their pauses are cleared.
//
// # Takeover
//
// A consumer that dies without leaving its group (kill -9, a lost host)
// keeps its partitions until the group's session timeout ends: 45s with
// franz-go's defaults, while its retry records fall due. Config's
// SessionTimeout, HeartbeatInterval and RebalanceTimeout set the group's
// (and ClientOpts can add kgo.InstanceID for static membership):
//
//   - SessionTimeout 6s (the brokers' default minimum,
//     group.min.session.timeout.ms) with HeartbeatInterval 1s hands a dead
//     consumer's partitions to another in about 6s; a lower minimum on the
//     brokers allows less.
//   - RebalanceTimeout bounds how long the others wait for a member to
//     rejoin; a rebalance also waits for the records of one poll (or, with
//     transactions, one CommitInterval) to be handled.
//   - With transactions, a transaction a dead consumer left open holds back
//     its partitions (their offsets are unstable, and committed readers of
//     the topics it wrote to stop before it) until
//     Config.TransactionTimeout ends it: 40s by default; a few times the
//     longest Handler call, 10s say, is enough, since a transaction lasts
//     about CommitInterval plus one call. Give each instance a stable
//     Config.TransactionalID too (its pod's name): a restarted instance
//     then aborts its predecessor's transaction at once.
//   - kgo.InstanceID (static membership) lets a restarted instance take its
//     partitions back without a rebalance.
//
// In TestKill9 the restarted consumer has the same kgo.InstanceID and
// TransactionalID as the one killed: it handled its first record at most
// 93 ms after its process started (120 restarts: 3 runs of both modes), where
// franz-go's defaults with a fresh instance would wait out the 45s session.
//
// # Sharing topics with Spring Kafka
//
// With Config.Naming = NamingSpring the topics are named as Spring Kafka's
// non-blocking retries name them, and every retry and DLQ record carries
// Spring's headers, in Spring's encodings, besides the x- ones, so a
// Processor and a Spring Kafka consumer (@RetryableTopic) can take turns on
// the same topics, each honouring the other's due times and attempt counts.
// The retry topics are then consumed, as Spring's retry listeners consume
// them, each by a group of its own named after the main group and the
// topic's suffix (Group+"-retry-0", …), so the two share committed offsets:
// a record one of them committed is not handled again by the other.
//
//	                  default                  NamingSpring
//	retry topic       T-retry                  T-retry
//	tier topics       T-retry-1 … T-retry-N    T-retry-0 … T-retry-(N−1)
//	dead letters      T-dlq                    T-dlt
//
//	Spring header                     encoding                         same as
//	retry_topic-attempts              4-byte big-endian int (1 byte    x-retry-attempt + 1: Spring
//	                                  read too)                        counts the attempt to come
//	retry_topic-backoff-timestamp     epoch ms as Java's               x-process-after (retry only)
//	                                  BigInteger.toByteArray
//	retry_topic-original-timestamp    epoch ms, BigInteger bytes       x-first-attempt-timestamp
//	kafka_dlt-original-topic          UTF-8                            x-original-topic
//	kafka_dlt-original-partition      4-byte big-endian int            x-original-partition
//	kafka_dlt-original-offset         8-byte big-endian long           x-original-offset
//	kafka_dlt-exception-fqcn          UTF-8                            x-last-error-type
//	kafka_dlt-exception-message       UTF-8                            x-last-error-message
//
// The encodings are spring-kafka's own (DeadLetterPublishingRecovererFactory
// writes the retry_topic- headers, ByteBuffer.putInt for attempts,
// BigInteger for timestamps; DeadLetterPublishingRecoverer writes the
// kafka_dlt- ones with ByteBuffer.putInt and putLong; names from
// RetryTopicHeaders and KafkaHeaders). ReadState reads them in any mode:
// where a record carries both, Spring's win, since Spring rewrites its own at
// each hop but copies ours along unchanged. It also reads Spring 3's
// kafka_original-topic/-partition/-offset and kafka_exception-fqcn/-message.
// Spring 2.7's backoff timestamp, an ISO date-time without a zone, says no
// instant: it reads as malformed and the record is due at once. The error
// class Spring writes is a Java class name; a Go handler whose errors have a
// Code() (see Coder) can give the same names, so that DLQ tooling and
// Replay's ErrorType filter see one vocabulary.
//
// # Tracing
//
// The trace context of the original record travels with it: the
// traceparent, tracestate and baggage headers that an OpenTelemetry producer
// wrote (franz-go's kotel plugin, or any W3C propagator) are user headers, so
// every retry copy and the DLQ copy carry them byte for byte, in their place
// among the others, and Replay keeps them too. The Processor writes no trace
// header of its own: a record produced without trace context gets none.
//
// Each handling, of the original or of a retry, reads that context from the
// record's headers with Config.Propagator (W3C Trace Context and Baggage by
// default; otel.GetTextMapPropagator() for the application's own) and starts
// a span, SpanName ("kafkaretry.handle"), of kind consumer, as its child. The
// Handler's ctx and the ctx Policy.Observer hears the attempt with carry
// that span and the baggage, so a span the Handler or an observer starts
// (retryotel's, for one) is in the original trace. The span has OTel's
// messaging attributes (messaging.system "kafka", messaging.destination.name
// the record's topic, messaging.destination.partition.id,
// messaging.kafka.offset, messaging.consumer.group.name) and
// kafkaretry.attempt (1 for the first handling), on a retry
// kafkaretry.original_topic, _partition and _offset, and at its end
// kafkaretry.outcome (succeeded, retrying, gave-up, or interrupted when Run
// stopped first), kafkaretry.forwarded_to, kafkaretry.dlq_reason and, after
// a failure, the error and error.type, with status Error.
//
// Spans are recorded once there is a TracerProvider: Config.TracerProvider,
// else the global one (otel.SetTracerProvider), which records nothing until
// the application sets it. Without one, the Handler's ctx still carries the
// record's trace context, as a remote parent. Every handling of a record is
// a child of the span its headers name, the producer's: the handlings of a
// record are siblings in one trace. A forward is produced with the
// handling's ctx, so a producer hook that traces (kotel's, in
// Config.ClientOpts) makes its publish span a child of the handling and
// writes that span into the copy's traceparent, in the same trace: each
// retry is then the child of the previous one's publish. A record without
// trace context starts a new trace at each handling; the
// kafkaretry.original_* attributes find them together.
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
