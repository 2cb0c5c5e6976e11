------------------------------ MODULE LogPlayer ------------------------------
(***************************************************************************)
(* The LogPlayer delivery protocol (DESIGN.md section 5, the paper's       *)
(* Algorithms 1-5), as the Go code implements it: targetqueue.Queue and    *)
(* dispatcher.Dispatcher are the pure operators Q* and the Dispatch /      *)
(* Return / PushCatchup / FetchingCompleted / NextBatchForTerm / AckTerm / *)
(* Progress steps below; the goroutines of fetcher/ and logplayer/ are the *)
(* processes.  See README.md for the mapping to Go files and functions.    *)
(*                                                                         *)
(* Safety (invariant ExactlyOnceInOrder): every target has applied exactly *)
(* the log's messages for its topics up to its applied LSN, in LSN order,  *)
(* each once, and never received a message at or below its applied LSN.   *)
(* Liveness (property EventuallyAllApplied): with weak fairness for every  *)
(* LogPlayer goroutine, target and restart (never for a crash), once the   *)
(* NFAILURES crashes are spent every target ends up with all its messages. *)
(***************************************************************************)
EXTENDS Naturals, Sequences, FiniteSets, TLC

CONSTANTS
    Targets,        \* the target ids
    Sub,            \* Sub[t]: the topics target t subscribes to
    TxnTopics,      \* TxnTopics[l]: the topics transaction (LSN) l writes
    NMESSAGES,      \* committed transactions in the log: LSNs 1..NMESSAGES
    NFAILURES,      \* crashes (of a target or of the LogPlayer) in a behaviour
    QMAX,           \* targetqueue.Config.MaxCount, per inner queue
    MAXBATCH,       \* NextBatch maxCount
    WINDOW,         \* batches in flight per target (Config.WindowBatches)
    UseTerms,       \* FALSE: the Broken variant: the caller's term is ignored
    AtomicDispatch  \* FALSE: the Broken variant: Dispatch reads the terms in
                    \* one step and pushes in a later one (not one lock)

ASSUME NMESSAGES \in Nat /\ NFAILURES \in Nat
ASSUME QMAX \in Nat \ {0} /\ MAXBATCH \in Nat \ {0} /\ WINDOW \in Nat \ {0}
ASSUME UseTerms \in BOOLEAN /\ AtomicDispatch \in BOOLEAN
ASSUME \A l \in 1..NMESSAGES : TxnTopics[l] # {}

(* The model used by LogPlayer.cfg: target A reads topic x, target B reads *)
(* topic y; transaction 1 writes both, 2 only x, 3 only y, 4 both, ...   *)
(* so some messages go to one target only.                                *)
ModelTargets == {"A", "B"}
ModelSub == [t \in ModelTargets |-> IF t = "A" THEN {"x"} ELSE {"y"}]
ModelTxnTopics == [l \in 1..NMESSAGES |->
                     CASE l % 3 = 1 -> {"x", "y"}
                       [] l % 3 = 2 -> {"x"}
                       [] OTHER     -> {"y"}]

Max(a, b) == IF a >= b THEN a ELSE b
Min(S) == CHOOSE x \in S : \A y \in S : x <= y

(* The targets a transaction goes to (dispatcher: target.msg is ok).      *)
(* The *Tab definitions are constant: TLC computes them once.             *)
DestTab == [l \in 1..NMESSAGES |-> {t \in Targets : TxnTopics[l] \cap Sub[t] # {}}]
Dest(l) == DestTab[l]

(* t's messages among LSNs 1..n, in LSN order: what t must have applied   *)
(* once its applied LSN is n.                                              *)
RECURSIVE MsgsUpTo(_, _)
MsgsUpTo(t, n) == IF n = 0 THEN <<>>
                  ELSE IF t \in Dest(n) THEN Append(MsgsUpTo(t, n - 1), n)
                  ELSE MsgsUpTo(t, n - 1)
MsgsTab == [t \in Targets |-> [n \in 0..NMESSAGES |-> MsgsUpTo(t, n)]]
Msgs(t, n) == MsgsTab[t][n]

(* The first LSN in from..to for t, or to + 1: a recovery stream's topic   *)
(* filter (the LogStore Read sends only what the target subscribes to).   *)
NextForTab ==
    [t \in Targets, from \in 1..NMESSAGES + 1, to \in 0..NMESSAGES |->
        LET S == {l \in from..to : t \in Dest(l)}
        IN  IF S = {} THEN to + 1 ELSE Min(S)]
NextFor(t, from, to) == NextForTab[t, from, to]

(***************************************************************************)
(* targetqueue.Queue as a value.  A message is [lsn, data]; data = FALSE   *)
(* is a progress marker (Msg with no slices).                              *)
(***************************************************************************)
Data(l)     == [lsn |-> l, data |-> TRUE]
Marker(l)   == [lsn |-> l, data |-> FALSE]
NoMsg       == [lsn |-> 0, data |-> FALSE]
QNew(term)  == [st |-> "S", term |-> term, normal |-> <<>>,
                catchup |-> <<>>, inflight |-> <<>>]

\* Queue.Front
QFront(r) ==
    IF r.st \in {"RF", "FC"} /\ r.catchup # <<>> THEN Head(r.catchup)
    ELSE IF r.st = "N" /\ r.normal # <<>> THEN Head(r.normal)
    ELSE NoMsg

\* Queue.Pop: in FC, popping the last catchup message moves to N.
QPop(r) ==
    IF r.st \in {"RF", "FC"}
    THEN IF r.st = "FC" /\ Len(r.catchup) = 1
         THEN [r EXCEPT !.catchup = <<>>, !.st = "N"]
         ELSE [r EXCEPT !.catchup = Tail(@)]
    ELSE [r EXCEPT !.normal = Tail(@)]

\* Queue.NextBatch(max): pop fronts while there is one, up to max.  The
\* in-flight list keeps one entry per batch, its last LSN: the conn's window
\* (logplayer/conn.go) counts batches, and Queue.Ack releases messages by
\* LSN, so both release exactly the batches whose last LSN is acked.
RECURSIVE QTake(_, _, _)
QTake(r, b, n) ==
    IF n = 0 \/ QFront(r) = NoMsg THEN [q |-> r, batch |-> b]
    ELSE QTake(QPop(r), Append(b, QFront(r)), n - 1)
QNextBatch(r, max) ==
    LET res == QTake(r, <<>>, max)
    IN  [q |-> [res.q EXCEPT !.inflight = Append(@, res.batch[Len(res.batch)].lsn)],
         batch |-> res.batch]

\* Queue.Ack(lsn): release the in-flight messages with LSN <= lsn.
QAck(r, lsn) == [r EXCEPT !.inflight = SelectSeq(@, LAMBDA x : x > lsn)]

\* Queue.Suspend: clear everything, state S; the term is unchanged.
QSuspend(r) == [r EXCEPT !.st = "S", !.normal = <<>>, !.catchup = <<>>, !.inflight = <<>>]

\* Queue.Return: clear everything, term + 1, state RF (legal in any state).
QReturn(r) == [QSuspend(r) EXCEPT !.st = "RF", !.term = r.term + 1]

\* Queue.FetchingCompleted(term)
QFetchingCompleted(r, term) ==
    IF (term = r.term \/ ~UseTerms) /\ r.st = "RF"
    THEN [r EXCEPT !.st = IF r.catchup = <<>> THEN "N" ELSE "FC"]
    ELSE r

\* Queue.Push(m, fromMain, term) for a push that is neither stale nor in S
\* and has room (the callers check those cases, as the Go callers switch on
\* the PushResult).
QAppend(r, m, fromMain) ==
    IF fromMain THEN [r EXCEPT !.normal = Append(@, m)]
    ELSE [r EXCEPT !.catchup = Append(@, m)]

(* LSNs in a sequence of messages, and of its data messages only.          *)
LSNs(b)     == [i \in 1..Len(b) |-> b[i].lsn]
DataLSNs(b) == LSNs(SelectSeq(b, LAMBDA m : m.data))

NoSnap == [t \in Targets |-> 0]

(***************************************************************************
--algorithm LogPlayer
variables
    \* ---- LogPlayer process memory (lost when the LogPlayer crashes) ----
    playerUp   = TRUE,
    q          = [t \in Targets |-> QNew(1)],   \* dispatcher: target.q
    lastAck    = [t \in Targets |-> 0],         \* dispatcher: target.lastAck
    currentLSN = 0,                             \* dispatcher: mu.currentLSN
    snap       = NoSnap,  \* terms read by a non-atomic Dispatch (Broken only)
    jobs       = [t \in Targets |-> {}],        \* running recovery fetchers
    linkOK     = [t \in Targets |-> FALSE],     \* t's current stream is alive
    stale      = [t \in Targets |-> FALSE],     \* Broken only: a stale sender runs
    \* ---- the network: per-target FIFO stream ----
    chan       = [t \in Targets |-> <<>>],      \* batches sent, not yet applied
    ackMsg     = [t \in Targets |-> 0],         \* latest cumulative ack, 0 = none
    \* ---- targets (durable, survive crashes) ----
    tgtUp      = [t \in Targets |-> TRUE],
    applied    = [t \in Targets |-> 0],         \* durable applied LSN
    appliedSeq = [t \in Targets |-> <<>>],      \* history of data LSNs applied
    \* ---- bookkeeping ----
    refused    = [t \in Targets |-> FALSE],     \* a batch at/below applied arrived
    goPanic    = FALSE,  \* a step where the Go code panics was reached
    nfail      = 0;

define
    \* The transactions of the main stream still to dispatch.
    mainNext == currentLSN + 1

    \* Dispatcher.Dispatch(l) with the terms read in terms: for each target the
    \* message is skipped (not subscribed, or lastAck >= l), dropped (stale
    \* term or S), pushed, or overflows (the target is suspended: "slow").
    Pushes(t, l, term) ==
        t \in Dest(l) /\ lastAck[t] < l /\ q[t].st # "S"
        /\ (term = q[t].term \/ ~UseTerms)
    Slow(l, terms) == {t \in Targets : Pushes(t, l, terms[t]) /\ Len(q[t].normal) >= QMAX}
    DispatchQ(l, terms) ==
        [t \in Targets |->
            IF t \in Slow(l, terms) THEN QSuspend(q[t])
            ELSE IF Pushes(t, l, terms[t]) THEN QAppend(q[t], Data(l), TRUE)
            ELSE q[t]]

    \* --- properties ---
    AllDelivered == \A t \in Targets : appliedSeq[t] = Msgs(t, NMESSAGES)

    ExactlyOnceInOrder ==
        \A t \in Targets : appliedSeq[t] = Msgs(t, applied[t]) /\ ~refused[t]

    \* The dispatcher never believes a target has more than it has.
    AckSound == \A t \in Targets : lastAck[t] <= applied[t]

    \* What targetqueue and dispatcher check with panics never happens:
    \* LSNs strictly increase in each queue and in flight, every catchup LSN
    \* is below every normal LSN, the bounds hold, N has no catchup, S holds
    \* nothing, and no catchup push of the current term reaches a non-RF queue.
    Increasing(s) == \A i \in 1..Len(s) - 1 : s[i] < s[i + 1]
    QueueInvariant ==
        /\ ~goPanic
        /\ \A t \in Targets :
            LET r == q[t] IN
            /\ Increasing(r.inflight \o LSNs(r.catchup) \o LSNs(r.normal))
            /\ Len(r.normal) <= QMAX /\ Len(r.catchup) <= QMAX
            /\ r.st = "N" => r.catchup = <<>>
            /\ r.st = "S" => r.normal = <<>> /\ r.catchup = <<>> /\ r.inflight = <<>>

    TypeOK ==
        /\ playerUp \in BOOLEAN
        /\ currentLSN \in 0..NMESSAGES
        /\ nfail \in 0..NFAILURES
        /\ \A t \in Targets :
            /\ q[t].st \in {"N", "RF", "FC", "S"}
            /\ applied[t] \in 0..NMESSAGES
            /\ lastAck[t] \in 0..NMESSAGES
            /\ Len(q[t].inflight) <= WINDOW
end define;

\* The main fetcher: Dispatch(currentLSN + 1), ..., Dispatch(NMESSAGES).
\* Go: fetcher main stream -> logplayer engine -> Dispatcher.Dispatch.
fair process mainFetcher = "main"
begin
mf: while TRUE do
    await playerUp /\ mainNext <= NMESSAGES;
    if AtomicDispatch \/ snap # NoSnap then
        \* One step under d.mu: read the terms, push or suspend, advance.
        with terms = IF AtomicDispatch THEN [t \in Targets |-> q[t].term] ELSE snap do
            linkOK := [t \in Targets |-> IF t \in Slow(mainNext, terms) THEN FALSE ELSE linkOK[t]];
            q := DispatchQ(mainNext, terms);
            currentLSN := mainNext;
            snap := NoSnap;
        end with;
    else
        \* Broken variant: the terms are read under one lock ...
        snap := [t \in Targets |-> q[t].term];
    end if;
end while;
end process;

\* A recovery fetcher: reads (from, to] of its target's topics from the
\* LogStore, PushCatchup(t, term, l) each, then FetchingCompleted(t, term).
\* Stale fetchers (an older term) keep running until a push tells them so.
fair process recoveryFetcher \in {"fetch"} \X Targets
begin
rf: while TRUE do
    await playerUp /\ jobs[self[2]] # {};
    with t = self[2], j \in jobs[t] do
        if j.next > j.to then
            \* Dispatcher.FetchingCompleted(t, j.term)
            q[t] := QFetchingCompleted(q[t], j.term);
            jobs[t] := jobs[t] \ {j};
        elsif (UseTerms /\ j.term # q[t].term) \/ q[t].st = "S" then
            \* PushCatchup: DroppedStale or DroppedSuspended: the fetcher stops.
            jobs[t] := jobs[t] \ {j};
        elsif q[t].st # "RF" then
            \* Queue.Push panics: catchup push outside RF (only reachable
            \* when the term check is off).
            goPanic := UseTerms;
            jobs[t] := jobs[t] \ {j};
        else
            \* PushCatchup: Overflow makes the fetcher wait for room.
            await Len(q[t].catchup) < QMAX;
            if lastAck[t] < j.next then
                q[t] := QAppend(q[t], Data(j.next), FALSE);
            end if;
            jobs[t] := (jobs[t] \ {j}) \cup {[j EXCEPT !.next = NextFor(t, j.next + 1, j.to)]};
        end if;
    end with;
end while;
end process;

\* The sender goroutine of t's stream: NextBatchForTerm(t, term, ...) then
\* stream.Send, while fewer than WINDOW batches are in flight.  The batch
\* reaches the target only if the stream is still alive; the sender of a
\* failed stream may still take a batch before it notices (the batch is
\* lost).
fair process sender \in {"send"} \X Targets
begin
sd: while TRUE do
    await playerUp;
    with t = self[2] do
        await q[t].st # "S" /\ Len(q[t].inflight) < WINDOW /\ QFront(q[t]) # NoMsg;
        with r = QNextBatch(q[t], MAXBATCH) do
            q[t] := r.q;
            if linkOK[t] then
                chan[t] := Append(chan[t], r.batch);
            end if;
        end with;
    end with;
end while;
end process;

\* The sender goroutine of the previous stream of t, until it notices that
\* its stream is gone.  With terms, NextBatchForTerm gives it nothing, so it
\* only exists in the Broken variant (stale[t] stays FALSE otherwise), where
\* it takes the new stream's messages and loses them on its dead stream.
fair process staleSender \in {"stale"} \X Targets
begin
ss: while TRUE do
    await playerUp /\ stale[self[2]];
    with t = self[2] do
        either
            await q[t].st # "S" /\ Len(q[t].inflight) < WINDOW /\ QFront(q[t]) # NoMsg;
            q[t] := QNextBatch(q[t], MAXBATCH).q;
        or
            stale[t] := FALSE;
        end either;
    end with;
end while;
end process;

\* The target (target SDK + application): applies the next batch and stores
\* its applied LSN in one local transaction, then acks it cumulatively.
fair process target \in {"target"} \X Targets
begin
tg: while TRUE do
    await tgtUp[self[2]] /\ chan[self[2]] # <<>>;
    with t = self[2], b = Head(chan[t]) do
        refused[t] := refused[t] \/ ~Increasing(<<applied[t]>> \o LSNs(b));
        appliedSeq[t] := appliedSeq[t] \o DataLSNs(b);
        applied[t] := b[Len(b)].lsn;
        ackMsg[t] := b[Len(b)].lsn;
        chan[t] := Tail(chan[t]);
    end with;
end while;
end process;

\* The receiver goroutine of the live stream: AckTerm(t, term, lsn).
fair process receiver \in {"recv"} \X Targets
begin
rc: while TRUE do
    await playerUp /\ linkOK[self[2]] /\ ackMsg[self[2]] # 0;
    with t = self[2] do
        lastAck[t] := Max(lastAck[t], ackMsg[t]);
        q[t] := QAck(q[t], ackMsg[t]);
        ackMsg[t] := 0;
    end with;
end while;
end process;

\* The engine's per-target connection manager and progress ticker.
fair process engine \in {"engine"} \X Targets
begin
en: while TRUE do
    await playerUp;
    with t = self[2] do
        either
            \* The stream failed: Dispatcher.Suspend(t).
            await ~linkOK[t] /\ q[t].st # "S";
            q[t] := QSuspend(q[t]);
        or
            \* Reconnect, after the session ended in S: (a crashed target
            \* restarts and) the handshake makes the target drop the old
            \* stream and report its durable applied LSN; then Return.
            await ~linkOK[t] /\ q[t].st = "S";
            with nt = q[t].term + 1 do
                tgtUp[t] := TRUE;
                stale[t] := ~UseTerms /\ nt > 2;
                chan[t] := <<>>;
                ackMsg[t] := 0;
                linkOK[t] := TRUE;
                lastAck[t] := applied[t];
                if applied[t] >= currentLSN then
                    \* Recovery.Empty: FetchingCompleted at once, state N.
                    q[t] := [QReturn(q[t]) EXCEPT !.st = "N"];
                else
                    q[t] := QReturn(q[t]);
                    jobs[t] := jobs[t] \cup
                        {[term |-> nt, to |-> currentLSN,
                          next |-> NextFor(t, applied[t] + 1, currentLSN)]};
                end if;
            end with;
        or
            \* Dispatcher.Progress(t): a marker carrying currentLSN to an
            \* idle target in N.
            await q[t].st = "N" /\ lastAck[t] < currentLSN
                  /\ q[t].normal = <<>> /\ q[t].catchup = <<>> /\ q[t].inflight = <<>>;
            q[t] := QAppend(q[t], Marker(currentLSN), TRUE);
        end either;
    end with;
end while;
end process;

\* Target faults: not fair (they may never happen), at most NFAILURES with
\* the LogPlayer crashes.  A crash loses the batches on the wire; a crashed
\* target restarts in the engine's reconnect step (the time it is back but
\* not yet reconnected is invisible to everyone).  A network failure breaks
\* the stream while the target lives on and may still apply what reached it.
process targetFault \in {"fault"} \X Targets
begin
tf: while TRUE do
    await tgtUp[self[2]] /\ nfail < NFAILURES;
    with t = self[2] do
        either
            \* The target process crashes.
            tgtUp[t] := FALSE;
            chan[t] := <<>>;
            ackMsg[t] := 0;
        or
            \* The network fails.
            await linkOK[t];
        end either;
        linkOK[t] := FALSE;  \* the LogPlayer sees the stream fail
    end with;
    nfail := nfail + 1;
end while;
end process;

\* LogPlayer crash: all process memory is lost.  Batches already on the wire
\* may still be applied by the targets until the new instance's handshake.
process playerCrash = "playerCrash"
begin
pc1: while TRUE do
    await playerUp /\ nfail < NFAILURES;
    playerUp := FALSE;
    nfail := nfail + 1;
    q := [t \in Targets |-> QNew(1)];
    lastAck := [t \in Targets |-> 0];
    currentLSN := 0;
    snap := NoSnap;
    jobs := [t \in Targets |-> {}];
    linkOK := [t \in Targets |-> FALSE];
    stale := [t \in Targets |-> FALSE];
    ackMsg := [t \in Targets |-> 0];
end while;
end process;

\* LogPlayer restart (new epoch): handshake with every reachable target (the
\* targets drop the old epoch's streams), main stream from the lowest
\* applied LSN + 1 (the log's head if none answers).  Every target then goes
\* through the engine's reconnect (Dispatcher.Return) like a returning one.
fair process playerRestart = "playerRestart"
begin
pr: while TRUE do
    await ~playerUp;
    with up = {t \in Targets : tgtUp[t]} do
        chan := [t \in Targets |-> IF t \in up THEN <<>> ELSE chan[t]];
        currentLSN := IF up = {} THEN NMESSAGES ELSE Min({applied[t] : t \in up});
    end with;
    playerUp := TRUE;
end while;
end process;

\* Lets a finished run stutter instead of being reported as a deadlock; any
\* other state where nothing can move is a deadlock TLC reports.
process quiet = "quiet"
begin
qt: while TRUE do
    await AllDelivered;
end while;
end process;

end algorithm
***************************************************************************)
\* BEGIN TRANSLATION
VARIABLES playerUp, q, lastAck, currentLSN, snap, jobs, linkOK, stale, chan, 
          ackMsg, tgtUp, applied, appliedSeq, refused, goPanic, nfail

(* define statement *)
mainNext == currentLSN + 1




Pushes(t, l, term) ==
    t \in Dest(l) /\ lastAck[t] < l /\ q[t].st # "S"
    /\ (term = q[t].term \/ ~UseTerms)
Slow(l, terms) == {t \in Targets : Pushes(t, l, terms[t]) /\ Len(q[t].normal) >= QMAX}
DispatchQ(l, terms) ==
    [t \in Targets |->
        IF t \in Slow(l, terms) THEN QSuspend(q[t])
        ELSE IF Pushes(t, l, terms[t]) THEN QAppend(q[t], Data(l), TRUE)
        ELSE q[t]]


AllDelivered == \A t \in Targets : appliedSeq[t] = Msgs(t, NMESSAGES)

ExactlyOnceInOrder ==
    \A t \in Targets : appliedSeq[t] = Msgs(t, applied[t]) /\ ~refused[t]


AckSound == \A t \in Targets : lastAck[t] <= applied[t]





Increasing(s) == \A i \in 1..Len(s) - 1 : s[i] < s[i + 1]
QueueInvariant ==
    /\ ~goPanic
    /\ \A t \in Targets :
        LET r == q[t] IN
        /\ Increasing(r.inflight \o LSNs(r.catchup) \o LSNs(r.normal))
        /\ Len(r.normal) <= QMAX /\ Len(r.catchup) <= QMAX
        /\ r.st = "N" => r.catchup = <<>>
        /\ r.st = "S" => r.normal = <<>> /\ r.catchup = <<>> /\ r.inflight = <<>>

TypeOK ==
    /\ playerUp \in BOOLEAN
    /\ currentLSN \in 0..NMESSAGES
    /\ nfail \in 0..NFAILURES
    /\ \A t \in Targets :
        /\ q[t].st \in {"N", "RF", "FC", "S"}
        /\ applied[t] \in 0..NMESSAGES
        /\ lastAck[t] \in 0..NMESSAGES
        /\ Len(q[t].inflight) <= WINDOW


vars == << playerUp, q, lastAck, currentLSN, snap, jobs, linkOK, stale, chan, 
           ackMsg, tgtUp, applied, appliedSeq, refused, goPanic, nfail >>

ProcSet == {"main"} \cup ({"fetch"} \X Targets) \cup ({"send"} \X Targets) \cup ({"stale"} \X Targets) \cup ({"target"} \X Targets) \cup ({"recv"} \X Targets) \cup ({"engine"} \X Targets) \cup ({"fault"} \X Targets) \cup {"playerCrash"} \cup {"playerRestart"} \cup {"quiet"}

Init == (* Global variables *)
        /\ playerUp = TRUE
        /\ q = [t \in Targets |-> QNew(1)]
        /\ lastAck = [t \in Targets |-> 0]
        /\ currentLSN = 0
        /\ snap = NoSnap
        /\ jobs = [t \in Targets |-> {}]
        /\ linkOK = [t \in Targets |-> FALSE]
        /\ stale = [t \in Targets |-> FALSE]
        /\ chan = [t \in Targets |-> <<>>]
        /\ ackMsg = [t \in Targets |-> 0]
        /\ tgtUp = [t \in Targets |-> TRUE]
        /\ applied = [t \in Targets |-> 0]
        /\ appliedSeq = [t \in Targets |-> <<>>]
        /\ refused = [t \in Targets |-> FALSE]
        /\ goPanic = FALSE
        /\ nfail = 0

mainFetcher == /\ playerUp /\ mainNext <= NMESSAGES
               /\ IF AtomicDispatch \/ snap # NoSnap
                     THEN /\ LET terms == IF AtomicDispatch THEN [t \in Targets |-> q[t].term] ELSE snap IN
                               /\ linkOK' = [t \in Targets |-> IF t \in Slow(mainNext, terms) THEN FALSE ELSE linkOK[t]]
                               /\ q' = DispatchQ(mainNext, terms)
                               /\ currentLSN' = mainNext
                               /\ snap' = NoSnap
                     ELSE /\ snap' = [t \in Targets |-> q[t].term]
                          /\ UNCHANGED << q, currentLSN, linkOK >>
               /\ UNCHANGED << playerUp, lastAck, jobs, stale, chan, ackMsg, 
                               tgtUp, applied, appliedSeq, refused, goPanic, 
                               nfail >>

recoveryFetcher(self) == /\ playerUp /\ jobs[self[2]] # {}
                         /\ LET t == self[2] IN
                              \E j \in jobs[t]:
                                IF j.next > j.to
                                   THEN /\ q' = [q EXCEPT ![t] = QFetchingCompleted(q[t], j.term)]
                                        /\ jobs' = [jobs EXCEPT ![t] = jobs[t] \ {j}]
                                        /\ UNCHANGED goPanic
                                   ELSE /\ IF (UseTerms /\ j.term # q[t].term) \/ q[t].st = "S"
                                              THEN /\ jobs' = [jobs EXCEPT ![t] = jobs[t] \ {j}]
                                                   /\ UNCHANGED << q, goPanic >>
                                              ELSE /\ IF q[t].st # "RF"
                                                         THEN /\ goPanic' = UseTerms
                                                              /\ jobs' = [jobs EXCEPT ![t] = jobs[t] \ {j}]
                                                              /\ q' = q
                                                         ELSE /\ Len(q[t].catchup) < QMAX
                                                              /\ IF lastAck[t] < j.next
                                                                    THEN /\ q' = [q EXCEPT ![t] = QAppend(q[t], Data(j.next), FALSE)]
                                                                    ELSE /\ TRUE
                                                                         /\ q' = q
                                                              /\ jobs' = [jobs EXCEPT ![t] = (jobs[t] \ {j}) \cup {[j EXCEPT !.next = NextFor(t, j.next + 1, j.to)]}]
                                                              /\ UNCHANGED goPanic
                         /\ UNCHANGED << playerUp, lastAck, currentLSN, snap, 
                                         linkOK, stale, chan, ackMsg, tgtUp, 
                                         applied, appliedSeq, refused, nfail >>

sender(self) == /\ playerUp
                /\ LET t == self[2] IN
                     /\ q[t].st # "S" /\ Len(q[t].inflight) < WINDOW /\ QFront(q[t]) # NoMsg
                     /\ LET r == QNextBatch(q[t], MAXBATCH) IN
                          /\ q' = [q EXCEPT ![t] = r.q]
                          /\ IF linkOK[t]
                                THEN /\ chan' = [chan EXCEPT ![t] = Append(chan[t], r.batch)]
                                ELSE /\ TRUE
                                     /\ chan' = chan
                /\ UNCHANGED << playerUp, lastAck, currentLSN, snap, jobs, 
                                linkOK, stale, ackMsg, tgtUp, applied, 
                                appliedSeq, refused, goPanic, nfail >>

staleSender(self) == /\ playerUp /\ stale[self[2]]
                     /\ LET t == self[2] IN
                          \/ /\ q[t].st # "S" /\ Len(q[t].inflight) < WINDOW /\ QFront(q[t]) # NoMsg
                             /\ q' = [q EXCEPT ![t] = QNextBatch(q[t], MAXBATCH).q]
                             /\ stale' = stale
                          \/ /\ stale' = [stale EXCEPT ![t] = FALSE]
                             /\ q' = q
                     /\ UNCHANGED << playerUp, lastAck, currentLSN, snap, jobs, 
                                     linkOK, chan, ackMsg, tgtUp, applied, 
                                     appliedSeq, refused, goPanic, nfail >>

target(self) == /\ tgtUp[self[2]] /\ chan[self[2]] # <<>>
                /\ LET t == self[2] IN
                     LET b == Head(chan[t]) IN
                       /\ refused' = [refused EXCEPT ![t] = refused[t] \/ ~Increasing(<<applied[t]>> \o LSNs(b))]
                       /\ appliedSeq' = [appliedSeq EXCEPT ![t] = appliedSeq[t] \o DataLSNs(b)]
                       /\ applied' = [applied EXCEPT ![t] = b[Len(b)].lsn]
                       /\ ackMsg' = [ackMsg EXCEPT ![t] = b[Len(b)].lsn]
                       /\ chan' = [chan EXCEPT ![t] = Tail(chan[t])]
                /\ UNCHANGED << playerUp, q, lastAck, currentLSN, snap, jobs, 
                                linkOK, stale, tgtUp, goPanic, nfail >>

receiver(self) == /\ playerUp /\ linkOK[self[2]] /\ ackMsg[self[2]] # 0
                  /\ LET t == self[2] IN
                       /\ lastAck' = [lastAck EXCEPT ![t] = Max(lastAck[t], ackMsg[t])]
                       /\ q' = [q EXCEPT ![t] = QAck(q[t], ackMsg[t])]
                       /\ ackMsg' = [ackMsg EXCEPT ![t] = 0]
                  /\ UNCHANGED << playerUp, currentLSN, snap, jobs, linkOK, 
                                  stale, chan, tgtUp, applied, appliedSeq, 
                                  refused, goPanic, nfail >>

engine(self) == /\ playerUp
                /\ LET t == self[2] IN
                     \/ /\ ~linkOK[t] /\ q[t].st # "S"
                        /\ q' = [q EXCEPT ![t] = QSuspend(q[t])]
                        /\ UNCHANGED <<lastAck, jobs, linkOK, stale, chan, ackMsg, tgtUp>>
                     \/ /\ ~linkOK[t] /\ q[t].st = "S"
                        /\ LET nt == q[t].term + 1 IN
                             /\ tgtUp' = [tgtUp EXCEPT ![t] = TRUE]
                             /\ stale' = [stale EXCEPT ![t] = ~UseTerms /\ nt > 2]
                             /\ chan' = [chan EXCEPT ![t] = <<>>]
                             /\ ackMsg' = [ackMsg EXCEPT ![t] = 0]
                             /\ linkOK' = [linkOK EXCEPT ![t] = TRUE]
                             /\ lastAck' = [lastAck EXCEPT ![t] = applied[t]]
                             /\ IF applied[t] >= currentLSN
                                   THEN /\ q' = [q EXCEPT ![t] = [QReturn(q[t]) EXCEPT !.st = "N"]]
                                        /\ jobs' = jobs
                                   ELSE /\ q' = [q EXCEPT ![t] = QReturn(q[t])]
                                        /\ jobs' = [jobs EXCEPT ![t] =        jobs[t] \cup
                                                                       {[term |-> nt, to |-> currentLSN,
                                                                         next |-> NextFor(t, applied[t] + 1, currentLSN)]}]
                     \/ /\ q[t].st = "N" /\ lastAck[t] < currentLSN
                           /\ q[t].normal = <<>> /\ q[t].catchup = <<>> /\ q[t].inflight = <<>>
                        /\ q' = [q EXCEPT ![t] = QAppend(q[t], Marker(currentLSN), TRUE)]
                        /\ UNCHANGED <<lastAck, jobs, linkOK, stale, chan, ackMsg, tgtUp>>
                /\ UNCHANGED << playerUp, currentLSN, snap, applied, 
                                appliedSeq, refused, goPanic, nfail >>

targetFault(self) == /\ tgtUp[self[2]] /\ nfail < NFAILURES
                     /\ LET t == self[2] IN
                          /\ \/ /\ tgtUp' = [tgtUp EXCEPT ![t] = FALSE]
                                /\ chan' = [chan EXCEPT ![t] = <<>>]
                                /\ ackMsg' = [ackMsg EXCEPT ![t] = 0]
                             \/ /\ linkOK[t]
                                /\ UNCHANGED <<chan, ackMsg, tgtUp>>
                          /\ linkOK' = [linkOK EXCEPT ![t] = FALSE]
                     /\ nfail' = nfail + 1
                     /\ UNCHANGED << playerUp, q, lastAck, currentLSN, snap, 
                                     jobs, stale, applied, appliedSeq, refused, 
                                     goPanic >>

playerCrash == /\ playerUp /\ nfail < NFAILURES
               /\ playerUp' = FALSE
               /\ nfail' = nfail + 1
               /\ q' = [t \in Targets |-> QNew(1)]
               /\ lastAck' = [t \in Targets |-> 0]
               /\ currentLSN' = 0
               /\ snap' = NoSnap
               /\ jobs' = [t \in Targets |-> {}]
               /\ linkOK' = [t \in Targets |-> FALSE]
               /\ stale' = [t \in Targets |-> FALSE]
               /\ ackMsg' = [t \in Targets |-> 0]
               /\ UNCHANGED << chan, tgtUp, applied, appliedSeq, refused, 
                               goPanic >>

playerRestart == /\ ~playerUp
                 /\ LET up == {t \in Targets : tgtUp[t]} IN
                      /\ chan' = [t \in Targets |-> IF t \in up THEN <<>> ELSE chan[t]]
                      /\ currentLSN' = (IF up = {} THEN NMESSAGES ELSE Min({applied[t] : t \in up}))
                 /\ playerUp' = TRUE
                 /\ UNCHANGED << q, lastAck, snap, jobs, linkOK, stale, ackMsg, 
                                 tgtUp, applied, appliedSeq, refused, goPanic, 
                                 nfail >>

quiet == /\ AllDelivered
         /\ UNCHANGED << playerUp, q, lastAck, currentLSN, snap, jobs, linkOK, 
                         stale, chan, ackMsg, tgtUp, applied, appliedSeq, 
                         refused, goPanic, nfail >>

Next == mainFetcher \/ playerCrash \/ playerRestart \/ quiet
           \/ (\E self \in {"fetch"} \X Targets: recoveryFetcher(self))
           \/ (\E self \in {"send"} \X Targets: sender(self))
           \/ (\E self \in {"stale"} \X Targets: staleSender(self))
           \/ (\E self \in {"target"} \X Targets: target(self))
           \/ (\E self \in {"recv"} \X Targets: receiver(self))
           \/ (\E self \in {"engine"} \X Targets: engine(self))
           \/ (\E self \in {"fault"} \X Targets: targetFault(self))

Spec == /\ Init /\ [][Next]_vars
        /\ WF_vars(mainFetcher)
        /\ \A self \in {"fetch"} \X Targets : WF_vars(recoveryFetcher(self))
        /\ \A self \in {"send"} \X Targets : WF_vars(sender(self))
        /\ \A self \in {"stale"} \X Targets : WF_vars(staleSender(self))
        /\ \A self \in {"target"} \X Targets : WF_vars(target(self))
        /\ \A self \in {"recv"} \X Targets : WF_vars(receiver(self))
        /\ \A self \in {"engine"} \X Targets : WF_vars(engine(self))
        /\ WF_vars(playerRestart)

\* END TRANSLATION

(* Once failures stop (they are bounded), every target has all its messages. *)
EventuallyAllApplied == <>[]AllDelivered

=============================================================================
