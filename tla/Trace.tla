------------------------------- MODULE Trace -------------------------------
(***************************************************************************)
(* Trace validation: checks that a trace recorded from the real Dispatcher *)
(* (go test -tags tlatrace ./dispatcher -run TestTrace; one JSON line per  *)
(* action, written under the dispatcher's mutex) is a behaviour of         *)
(* LogPlayer.tla's dispatcher side.  Each step must be the spec's action   *)
(* named by the next line, with the line's arguments, and must end in the  *)
(* state and outcome the line records (the target's queue state, term,    *)
(* last ack, the current LSN; Dispatch's woken and suspended targets, the  *)
(* batch's LSNs, the push and ack results).  What the trace cannot show    *)
(* (streams, wires, acks in flight: the environment) is taken from the     *)
(* line's arguments: the applied LSN of a Return, the term and LSN of an   *)
(* ack.  The recovery jobs are the spec's `jobs`: a catchup push must be   *)
(* the job's next LSN and FetchingCompleted must come after its last one.  *)
(* TLC stops with "Deadlock reached" at the first line no step matches     *)
(* (TraceAt shows which); a trace that is a behaviour ends in `Done`.      *)
(***************************************************************************)
EXTENDS LogPlayer, Json, TLC

CONSTANT TraceFile
TraceLog == ndJsonDeserialize(TraceFile)
Ev(n) == TraceLog[n]

TraceTargets == DOMAIN Ev(2).targets
TraceSub == [t \in TraceTargets |-> {Ev(2).targets[t][k] : k \in DOMAIN Ev(2).targets[t]}]
DispatchLines == {n \in 1..Len(TraceLog) : Ev(n).act = "Dispatch"}
TraceNMessages == Cardinality(DispatchLines)
TraceTxnTopics == [l \in 1..TraceNMessages |->
    LET n == CHOOSE n \in DispatchLines : Ev(n).lsn = l
    IN  {Ev(n).topics[k] : k \in DOMAIN Ev(n).topics}]
TraceQMax == Ev(1).qmax

VARIABLE i
tvars == <<vars, i>>
SetOf(s) == {s[k] : k \in DOMAIN s}

\* The recorded state of the line's target after its action.
Matches(e) ==
    /\ currentLSN' = e.current
    /\ e.t # "" => /\ q'[e.t].st = e.st
                   /\ q'[e.t].term = e.qterm
                   /\ lastAck'[e.t] = e.lastAck

Others == UNCHANGED << playerUp, epoch, snap, kicks, linkOK, sess, stale, zep,
                       zq, zterm, chan, zchan, acks, tgtUp, applied, appliedSeq,
                       act, refused, goPanic, nfail, nbogus >>

TargetsStep(e) ==
    IF Cardinality(DOMAIN e.targets) = 1   \* a new dispatcher (restart)
    THEN /\ q' = [t \in Targets |-> QNew(1)]
         /\ lastAck' = [t \in Targets |-> 0]
         /\ jobs' = [t \in Targets |-> {}]
         /\ currentLSN' = e.current
    ELSE UNCHANGED << q, lastAck, jobs, currentLSN >>

DispatchStep(e) ==
    LET terms == [t \in Targets |-> q[t].term] IN
    /\ e.lsn = mainNext
    /\ q' = DispatchQ(mainNext, terms)
    /\ currentLSN' = mainNext
    /\ SetOf(e.slow) = Slow(mainNext, terms)
    /\ SetOf(e.wake) = {t \in Targets : Pushes(t, mainNext, terms[t])} \ Slow(mainNext, terms)
    /\ UNCHANGED << lastAck, jobs >>

\* The engine's new session (Hello + Return), with the applied LSN the
\* target reported (the line's recovery range starts there).
ReturnStep(e) ==
    LET t == e.t  nt == q[t].term + 1 IN
    /\ q[t].st = "S"
    /\ e.term = nt /\ e.to = currentLSN
    /\ lastAck' = [lastAck EXCEPT ![t] = e.from]
    /\ IF e.from >= currentLSN
       THEN /\ e.res = "Empty"
            /\ q' = [q EXCEPT ![t] = [QReturn(q[t]) EXCEPT !.st = "N"]]
            /\ jobs' = jobs
       ELSE /\ e.res = "RF"
            /\ q' = [q EXCEPT ![t] = QReturn(q[t])]
            /\ jobs' = [jobs EXCEPT ![t] = @ \cup
                          {[term |-> nt, to |-> currentLSN, next |-> NextFor(t, e.from + 1, currentLSN)]}]
    /\ UNCHANGED currentLSN

\* recoveryFetcher: one PushCatchup of the job of e.term.  A transaction
\* without the target's topics is skipped by the fetcher's filter in the
\* spec (NextFor); Go reports it Pushed and changes nothing.
PushStep(e) ==
    LET t == e.t IN
    /\ UNCHANGED << lastAck, currentLSN >>
    /\ \E j \in jobs[t] : j.term = e.term /\ j.next <= j.to
    /\ LET j == CHOOSE j \in jobs[t] : j.term = e.term /\ j.next <= j.to IN
       IF j.term # q[t].term \/ q[t].st = "S"
       THEN /\ e.res = IF j.term # q[t].term THEN "DroppedStale" ELSE "DroppedSuspended"
            /\ jobs' = [jobs EXCEPT ![t] = @ \ {j}]
            /\ q' = q
       ELSE IF t \notin Dest(e.lsn)
       THEN /\ e.res = "Pushed" /\ e.lsn < j.next
            /\ UNCHANGED << q, jobs >>
       ELSE /\ q[t].st = "RF" /\ e.lsn = j.next
            /\ IF Len(q[t].catchup) < QMAX
               THEN /\ e.res = "Pushed"
                    /\ q' = [q EXCEPT ![t] = QAppend(q[t], Data(j.next), FALSE)]
                    /\ jobs' = [jobs EXCEPT ![t] = (@ \ {j}) \cup {[j EXCEPT !.next = NextFor(t, j.next + 1, j.to)]}]
               ELSE /\ e.res = "Overflow"   \* the fetcher waits and retries
                    /\ UNCHANGED << q, jobs >>

FetchingCompletedStep(e) ==
    LET t == e.t IN
    /\ \E j \in jobs[t] : j.term = e.term /\ j.next > j.to
    /\ LET j == CHOOSE j \in jobs[t] : j.term = e.term /\ j.next > j.to IN
       /\ q' = [q EXCEPT ![t] = QFetchingCompleted(q[t], j.term)]
       /\ jobs' = [jobs EXCEPT ![t] = @ \ {j}]
    /\ e.res = IF q[t].st = "RF" /\ e.term = q[t].term THEN "true" ELSE "false"
    /\ UNCHANGED << lastAck, currentLSN >>

SuspendStep(e) ==
    /\ q' = [q EXCEPT ![e.t] = QSuspend(q[e.t])]
    /\ UNCHANGED << lastAck, jobs, currentLSN >>

\* sender: NextBatchForTerm with the stream's term.
NextBatchStep(e) ==
    LET t == e.t IN
    /\ UNCHANGED << lastAck, jobs, currentLSN >>
    /\ IF e.term # q[t].term
       THEN e.res = "false" /\ q' = q
       ELSE /\ e.res = "true"
            /\ IF QFront(q[t]) = NoMsg
               THEN e.lsns = <<>> /\ q' = q
               ELSE LET r == QNextBatch(q[t], e.max) IN
                    /\ LSNs(r.batch) = e.lsns
                    /\ [k \in DOMAIN r.batch |-> r.batch[k].data] = e.data
                    /\ q' = [q EXCEPT ![t] = r.q]

\* receiver: AckTerm(t, term, lsn).
AckStep(e) ==
    LET t == e.t IN
    /\ UNCHANGED << jobs, currentLSN >>
    /\ IF e.term # q[t].term
       THEN e.res = "stale" /\ UNCHANGED << q, lastAck >>
       ELSE IF e.lsn > lastAck[t] /\ e.lsn > q[t].lastSent
       THEN e.res = "bogus" /\ UNCHANGED << q, lastAck >>
       ELSE /\ e.res = "ok"
            /\ lastAck' = [lastAck EXCEPT ![t] = Max(lastAck[t], e.lsn)]
            /\ q' = [q EXCEPT ![t] = QAck(q[t], e.lsn)]

\* engine: Progress (Go may decline a due marker: ProgressIdle).
ProgressStep(e) ==
    LET t == e.t IN
    /\ UNCHANGED << lastAck, jobs, currentLSN >>
    /\ IF e.res = "true"
       THEN /\ q[t].st = "N" /\ lastAck[t] < currentLSN
            /\ q[t].normal = <<>> /\ q[t].catchup = <<>> /\ q[t].inflight = <<>>
            /\ q' = [q EXCEPT ![t] = QAppend(q[t], Marker(currentLSN), TRUE)]
       ELSE q' = q

TraceInit == Init /\ i = 1

TraceNext ==
    /\ i <= Len(TraceLog)
    /\ i' = i + 1
    /\ Others
    /\ LET e == Ev(i) IN
       /\ CASE e.act = "Targets"           -> TargetsStep(e)
            [] e.act = "Dispatch"          -> DispatchStep(e)
            [] e.act = "Return"            -> ReturnStep(e)
            [] e.act = "PushCatchup"       -> PushStep(e)
            [] e.act = "FetchingCompleted" -> FetchingCompletedStep(e)
            [] e.act = "Suspend"           -> SuspendStep(e)
            [] e.act = "NextBatch"         -> NextBatchStep(e)
            [] e.act = "Ack"               -> AckStep(e)
            [] e.act = "Progress"          -> ProgressStep(e)
       /\ Matches(e)

\* Let a complete trace stutter, so that TLC's deadlock means a mismatch.
Done == i = Len(TraceLog) + 1 /\ UNCHANGED tvars

TraceNextOrDone == TraceNext \/ Done

\* The line reached; TLC prints it with the deadlock's state.
TraceAt == i

\* The spec's invariants of the dispatcher's side, on the trace's states.
TraceInvariant == QueueInvariant /\ CatchupAboveAck
=============================================================================
