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
    AtomicDispatch, \* FALSE: the Broken variant: Dispatch reads the terms in
                    \* one step and pushes in a later one (not one lock)
    ZOMBIES,        \* TRUE: a LogPlayer may lose its LogStore lease and be
                    \* replaced while it keeps running (a zombie), not only crash
    UseEpochs,      \* FALSE: the Broken variant: targets tell streams apart by
                    \* their term only, not by (epoch, term)
    NBOGUS,         \* bogus acks a faulty target may send in a behaviour
    AckChecks,      \* FALSE: the Broken variant: AckTerm without its bogus-ack check
    DupAcks,        \* TRUE: the network may deliver an ack more than once
    KICK            \* which kickIfSuspended calls exist: a subset of
                    \* {"session", "ticker"} (Go has both)

ASSUME NMESSAGES \in Nat /\ NFAILURES \in Nat
ASSUME QMAX \in Nat \ {0} /\ MAXBATCH \in Nat \ {0} /\ WINDOW \in Nat \ {0}
ASSUME UseTerms \in BOOLEAN /\ AtomicDispatch \in BOOLEAN
ASSUME ZOMBIES \in BOOLEAN /\ UseEpochs \in BOOLEAN /\ NBOGUS \in Nat
ASSUME AckChecks \in BOOLEAN /\ DupAcks \in BOOLEAN /\ KICK \subseteq {"session", "ticker"}
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
                catchup |-> <<>>, inflight |-> <<>>, lastSent |-> 0]

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
\* lastSent is Queue.lastSent: the highest LSN handed out in this term (kept
\* by Suspend, reset by Return); AckTerm uses it to tell a bogus ack.
RECURSIVE QTake(_, _, _)
QTake(r, b, n) ==
    IF n = 0 \/ QFront(r) = NoMsg THEN [q |-> r, batch |-> b]
    ELSE QTake(QPop(r), Append(b, QFront(r)), n - 1)
QNextBatch(r, max) ==
    LET res == QTake(r, <<>>, max)
    IN  [q |-> [res.q EXCEPT !.inflight = Append(@, res.batch[Len(res.batch)].lsn),
                             !.lastSent = res.batch[Len(res.batch)].lsn],
         batch |-> res.batch]

\* Queue.Ack(lsn): release the in-flight messages with LSN <= lsn.
QAck(r, lsn) == [r EXCEPT !.inflight = SelectSeq(@, LAMBDA x : x > lsn)]

\* Queue.Suspend: clear everything, state S; the term is unchanged.
QSuspend(r) == [r EXCEPT !.st = "S", !.normal = <<>>, !.catchup = <<>>, !.inflight = <<>>]

\* Queue.Return: clear everything, term + 1, state RF (legal in any state).
QReturn(r) == [QSuspend(r) EXCEPT !.st = "RF", !.term = r.term + 1, !.lastSent = 0]

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

(* A batch of an older epoch's stream in flight: [ep, term, b].             *)
Tag(c, a) == [i \in 1..Len(c) |-> [ep |-> a.ep, term |-> a.term, b |-> c[i]]]

(* What an instance's sender can still send a target, in sending order,   *)
(* without further fetching: in RF the normal queue waits for the end of   *)
(* the recovery (the zombie's fetchers are not modelled).                  *)
Unsent(r) == CASE r.st = "S"  -> <<>>
             []   r.st = "N"  -> r.normal
             []   r.st = "FC" -> r.catchup \o r.normal
             []   OTHER       -> r.catchup

(***************************************************************************
--algorithm LogPlayer
variables
    \* ---- the running LogPlayer's process memory (lost when it stops) ----
    playerUp   = TRUE,
    epoch      = 1,                             \* its epoch (NextEpoch)
    q          = [t \in Targets |-> QNew(1)],   \* dispatcher: target.q
    lastAck    = [t \in Targets |-> 0],         \* dispatcher: target.lastAck
    currentLSN = 0,                             \* dispatcher: mu.currentLSN
    snap       = NoSnap,  \* terms read by a non-atomic Dispatch (Broken only)
    kicks      = {},      \* Dispatch's slow list, before Player.dispatch's kickSlow
    jobs       = [t \in Targets |-> {}],        \* running recovery fetchers
    linkOK     = [t \in Targets |-> FALSE],     \* t's current stream is alive
    \* runner.session's steps: "ret" (Return done, conn not yet published:
    \* kickSlow misses it), "run" (conn published, kickIfSuspended done,
    \* sender started).
    sess       = [t \in Targets |-> "none"],
    stale      = [t \in Targets |-> FALSE],     \* Broken only: a stale sender runs
    \* ---- a zombie: an older LogPlayer that still runs ----
    zep        = 0,                             \* its epoch
    zq         = [t \in Targets |-> <<>>],      \* what its senders still send
    zterm      = [t \in Targets |-> 0],         \* the term of its stream to t
    \* ---- the network: one FIFO per stream ----
    chan       = [t \in Targets |-> <<>>],      \* the running LogPlayer's current stream
    zchan      = [t \in Targets |-> <<>>],      \* older epochs' streams: [ep, term, b]
    acks       = [t \in Targets |-> {}],        \* acks to the running LogPlayer: [term, lsn, bogus]
    \* ---- targets (durable, survive crashes) ----
    tgtUp      = [t \in Targets |-> TRUE],
    applied    = [t \in Targets |-> 0],         \* durable applied LSN
    appliedSeq = [t \in Targets |-> <<>>],      \* history of data LSNs applied
    act        = [t \in Targets |-> [ep |-> 1, term |-> 1]], \* active stream
    \* ---- bookkeeping ----
    refused    = [t \in Targets |-> FALSE],     \* a batch at/below applied arrived
    goPanic    = FALSE,  \* a step where the Go code panics was reached
    nfail      = 0,
    nbogus     = 0;

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

    \* The target SDK's stream identity: a batch is applied only if it
    \* belongs to the active stream (the one of the last accepted Hello).
    \* Broken variant: streams told apart by term only.
    OfStream(z, a) == z.term = a.term /\ (z.ep = a.ep \/ ~UseEpochs)

    \* --- properties ---
    AllDelivered == \A t \in Targets : appliedSeq[t] = Msgs(t, NMESSAGES)

    ExactlyOnceInOrder ==
        \A t \in Targets : appliedSeq[t] = Msgs(t, applied[t]) /\ ~refused[t]

    \* The dispatcher never believes a target has more than it has (honest
    \* targets: configs with NBOGUS = 0).
    AckSound == \A t \in Targets : lastAck[t] <= applied[t]
    \* With bogus acks: never more than the target has or than was sent to
    \* it in this term (what AckTerm can check).
    AckBounded == \A t \in Targets : lastAck[t] <= Max(applied[t], q[t].lastSent)

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

    \* Dispatcher.PushCatchup has no last-ack filter: the next push of a
    \* recovery fetcher of the current term is always above the last ack
    \* (Return sets lastAck to the range's start; in RF only catchup
    \* messages, pushed before, are sent and acked; bogus acks above what
    \* was sent are refused).
    CatchupAboveAck ==
        \A t \in Targets : \A j \in jobs[t] :
            (j.term = q[t].term /\ q[t].st = "RF" /\ j.next <= j.to) => lastAck[t] < j.next

    TypeOK ==
        /\ playerUp \in BOOLEAN
        /\ epoch \in 1..NFAILURES + 1
        /\ currentLSN \in 0..NMESSAGES
        /\ nfail \in 0..NFAILURES
        /\ nbogus \in 0..NBOGUS
        /\ kicks \subseteq Targets
        /\ \A t \in Targets :
            /\ q[t].st \in {"N", "RF", "FC", "S"}
            /\ sess[t] \in {"none", "ret", "run"}
            /\ applied[t] \in 0..NMESSAGES
            /\ lastAck[t] \in 0..NMESSAGES
            /\ q[t].lastSent \in 0..NMESSAGES
            /\ Len(q[t].inflight) <= WINDOW
            /\ act[t].ep \in 1..epoch
end define;

\* The main fetcher: Dispatch(currentLSN + 1), ..., Dispatch(NMESSAGES).
\* Go: fetcher main stream -> Player.dispatch -> Dispatcher.Dispatch (its
\* kickSlow calls are the next step, process kickSlow).
fair process mainFetcher = "main"
begin
mf: while TRUE do
    await playerUp /\ mainNext <= NMESSAGES /\ kicks = {};
    if AtomicDispatch \/ snap # NoSnap then
        \* One step under d.mu: read the terms, push or suspend, advance.
        with terms = IF AtomicDispatch THEN [t \in Targets |-> q[t].term] ELSE snap do
            kicks := Slow(mainNext, terms);
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

\* The rest of Player.dispatch, in the main fetcher's goroutine (so no
\* Dispatch runs before it): runner.kickSlow for each target Dispatch
\* suspended: end the conn the runner has published (r.mu.conn), if any.
fair process kickSlow = "kickSlow"
begin
ks: while TRUE do
    await kicks # {};
    linkOK := [t \in Targets |-> IF t \in kicks /\ sess[t] = "run"
                                 THEN FALSE ELSE linkOK[t]];
    kicks := {};
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
            \* PushCatchup: Overflow makes the fetcher wait for room.  (No
            \* last-ack filter: CatchupAboveAck shows it could never skip.)
            await Len(q[t].catchup) < QMAX;
            q[t] := QAppend(q[t], Data(j.next), FALSE);
            jobs[t] := (jobs[t] \ {j}) \cup {[j EXCEPT !.next = NextFor(t, j.next + 1, j.to)]};
        end if;
    end with;
end while;
end process;

\* The sender goroutine of t's stream (started after kickIfSuspended):
\* NextBatchForTerm(t, term, ...) then stream.Send, while fewer than WINDOW
\* batches are in flight.  The batch reaches the target only if the stream
\* is still alive; the sender of a failed stream may still take a batch
\* before it notices (the batch is lost).
fair process sender \in {"send"} \X Targets
begin
sd: while TRUE do
    await playerUp;
    with t = self[2] do
        await sess[t] = "run" /\ q[t].st # "S" /\ Len(q[t].inflight) < WINDOW
              /\ QFront(q[t]) # NoMsg;
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

\* A zombie's sender: the LogPlayer of an older epoch lost its lease but
\* still runs, and keeps sending what it had queued on its old streams.
fair process zombieSender \in {"zombie"} \X Targets
begin
zs: while TRUE do
    await zq[self[2]] # <<>>;
    with t = self[2], n = IF Len(zq[t]) < MAXBATCH THEN Len(zq[t]) ELSE MAXBATCH do
        zchan[t] := Append(zchan[t], [ep |-> zep, term |-> zterm[t], b |-> SubSeq(zq[t], 1, n)]);
        zq[t] := SubSeq(zq[t], n + 1, Len(zq[t]));
    end with;
end while;
end process;

\* The target (target SDK + application): applies the next batch of a
\* stream and stores its applied LSN in one durable step, then acks it
\* cumulatively on that stream.  A batch of a stream other than the active
\* one is dropped (the takeover rule, with epoch fencing).
fair process target \in {"target"} \X Targets
begin
tg: while TRUE do
    await tgtUp[self[2]] /\ (chan[self[2]] # <<>> \/ zchan[self[2]] # <<>>);
    with t = self[2] do
        either
            await chan[t] # <<>>;
            with b = Head(chan[t]) do
                refused[t] := refused[t] \/ ~Increasing(<<applied[t]>> \o LSNs(b));
                appliedSeq[t] := appliedSeq[t] \o DataLSNs(b);
                applied[t] := b[Len(b)].lsn;
                \* Acks of one stream are cumulative: the newest replaces
                \* the older ones still in flight (taking those later could
                \* only repeat what the newest says).
                acks[t] := {a \in acks[t] : a.term # act[t].term \/ a.bogus}
                           \cup {[term |-> act[t].term, lsn |-> b[Len(b)].lsn, bogus |-> FALSE]};
                chan[t] := Tail(chan[t]);
            end with;
        or
            \* A batch of an older epoch's stream; its ack (if any) goes to
            \* that LogPlayer, not to the running one.
            await zchan[t] # <<>>;
            with z = Head(zchan[t]) do
                if OfStream(z, act[t]) then
                    refused[t] := refused[t] \/ ~Increasing(<<applied[t]>> \o LSNs(z.b));
                    appliedSeq[t] := appliedSeq[t] \o DataLSNs(z.b);
                    applied[t] := z.b[Len(z.b)].lsn;
                end if;
                zchan[t] := Tail(zchan[t]);
            end with;
        end either;
    end with;
end while;
end process;

\* The receiver goroutines (runner.receive): AckTerm(t, term, lsn) with the
\* term of the stream that carried the ack.  Acks may arrive late (after a
\* Suspend, or after a reconnect: then their term is stale), out of order,
\* and, with DupAcks, more than once.  As in Go, a current-term ack is taken
\* even after the stream failed and the target was suspended.
fair process receiver \in {"recv"} \X Targets
begin
rc: while TRUE do
    await playerUp /\ acks[self[2]] # {};
    with t = self[2], a \in acks[t], dup \in (IF DupAcks THEN BOOLEAN ELSE {FALSE}) do
        if a.term # q[t].term then
            skip;  \* ErrStaleTerm: that stale conn's receiver ends
        elsif AckChecks /\ a.lsn > lastAck[t] /\ a.lsn > q[t].lastSent then
            linkOK[t] := FALSE;  \* ErrBogusAck: the conn is cancelled (resync)
        else
            lastAck[t] := Max(lastAck[t], a.lsn);
            q[t] := QAck(q[t], a.lsn);
        end if;
        if ~dup then
            acks[t] := acks[t] \ {a};
        end if;
    end with;
end while;
end process;

\* The runner (per-target connection manager) and the progress ticker.
fair process engine \in {"engine"} \X Targets
begin
en: while TRUE do
    await playerUp;
    with t = self[2] do
        either
            \* The session ended: Dispatcher.Suspend(t) (unless already S).
            await ~linkOK[t] /\ q[t].st # "S";
            q[t] := QSuspend(q[t]);
        or
            \* A new session, after the previous one ended in S: (a crashed
            \* target restarts and) the Hello makes the target drop the old
            \* stream and report its durable applied LSN; then Return.
            await ~linkOK[t] /\ q[t].st = "S" /\ sess[t] \in {"none", "run"};
            with nt = q[t].term + 1 do
                tgtUp[t] := TRUE;
                stale[t] := ~UseTerms /\ nt > 2;
                chan[t] := <<>>;
                act[t] := [ep |-> epoch, term |-> nt];
                linkOK[t] := TRUE;
                sess[t] := "ret";
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
            \* runner.session publishes its conn (r.mu.conn: from now on
            \* kickSlow ends it), then kickIfSuspended: Dispatch may have
            \* suspended the target between Return and the publication, when
            \* kickSlow found no conn.  Then it starts the receiver, recovery
            \* fetcher and sender.  (One step: a Dispatch after the
            \* publication is kicked by kickSlow either way.)
            await sess[t] = "ret";
            sess[t] := "run";
            if "session" \in KICK /\ q[t].st = "S" then
                linkOK[t] := FALSE;
            end if;
        or
            \* Player.progress's safety net: kickIfSuspended on the
            \* published conn.
            await "ticker" \in KICK /\ sess[t] = "run" /\ linkOK[t] /\ q[t].st = "S";
            linkOK[t] := FALSE;
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
\* the LogPlayer crashes.  A crash loses the batches on the wire (of every
\* stream); a crashed target restarts in the engine's reconnect step.  A
\* network failure breaks the stream while the target lives on and may
\* still apply what reached it.  A faulty target (at most NBOGUS times)
\* acks an LSN above its applied LSN on its active stream.
process targetFault \in {"fault"} \X Targets
begin
tf: while TRUE do
    await tgtUp[self[2]];
    with t = self[2] do
        either
            await nfail < NFAILURES;
            either
                \* The target process crashes.
                tgtUp[t] := FALSE;
                chan[t] := <<>>;
                zchan[t] := <<>>;
                zq[t] := <<>>;
            or
                \* The network fails.
                await linkOK[t];
            end either;
            linkOK[t] := FALSE;  \* the LogPlayer sees the stream fail
            nfail := nfail + 1;
        or
            await nbogus < NBOGUS /\ playerUp /\ act[t].ep = epoch /\ applied[t] < NMESSAGES;
            with l \in applied[t] + 1..NMESSAGES do
                acks[t] := acks[t] \cup {[term |-> act[t].term, lsn |-> l, bogus |-> TRUE]};
            end with;
            nbogus := nbogus + 1;
        end either;
    end with;
end while;
end process;

\* The LogPlayer stops: it crashes, or (ZOMBIES) it loses its lease and a
\* newer one is started while it keeps running: a zombie that sends what it
\* has queued on its open streams (it never reconnects: its Hello would be
\* refused with STALE_EPOCH).  Batches already on the wire may still be
\* applied while their stream is the target's active one.  All process
\* memory of the running LogPlayer is gone.
process playerCrash = "playerCrash"
begin
pc1: while TRUE do
    await playerUp /\ nfail < NFAILURES;
    with zombie \in (IF ZOMBIES THEN BOOLEAN ELSE {FALSE}) do
        zq := [t \in Targets |-> IF zombie /\ linkOK[t] /\ sess[t] = "run"
                                 THEN Unsent(q[t]) ELSE <<>>];
    end with;
    zchan := [t \in Targets |-> zchan[t] \o Tag(chan[t], act[t])];
    zterm := [t \in Targets |-> q[t].term];
    zep := epoch;
    epoch := epoch + 1;
    playerUp := FALSE;
    nfail := nfail + 1;
    q := [t \in Targets |-> QNew(1)];
    lastAck := [t \in Targets |-> 0];
    currentLSN := 0;
    snap := NoSnap;
    kicks := {};
    jobs := [t \in Targets |-> {}];
    linkOK := [t \in Targets |-> FALSE];
    sess := [t \in Targets |-> "none"];
    stale := [t \in Targets |-> FALSE];
    chan := [t \in Targets |-> <<>>];
    acks := [t \in Targets |-> {}];
end while;
end process;

\* LogPlayer start (new epoch): Hello to every reachable target, which
\* stores the higher epoch and drops the older epoch's streams; main stream
\* from the lowest applied LSN + 1 (the log's head if none answers).  Every
\* target then goes through the engine's reconnect (Dispatcher.Return) like
\* a returning one.
fair process playerRestart = "playerRestart"
begin
pr: while TRUE do
    await ~playerUp;
    with up = {t \in Targets : tgtUp[t]} do
        act := [t \in Targets |-> IF t \in up THEN [ep |-> epoch, term |-> 1] ELSE act[t]];
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
\* BEGIN TRANSLATION (chksum(pcal) = "2bdd63b0" /\ chksum(tla) = "a08d89ca")
VARIABLES playerUp, epoch, q, lastAck, currentLSN, snap, kicks, jobs, linkOK, 
          sess, stale, zep, zq, zterm, chan, zchan, acks, tgtUp, applied, 
          appliedSeq, act, refused, goPanic, nfail, nbogus

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




OfStream(z, a) == z.term = a.term /\ (z.ep = a.ep \/ ~UseEpochs)


AllDelivered == \A t \in Targets : appliedSeq[t] = Msgs(t, NMESSAGES)

ExactlyOnceInOrder ==
    \A t \in Targets : appliedSeq[t] = Msgs(t, applied[t]) /\ ~refused[t]



AckSound == \A t \in Targets : lastAck[t] <= applied[t]


AckBounded == \A t \in Targets : lastAck[t] <= Max(applied[t], q[t].lastSent)





Increasing(s) == \A i \in 1..Len(s) - 1 : s[i] < s[i + 1]
QueueInvariant ==
    /\ ~goPanic
    /\ \A t \in Targets :
        LET r == q[t] IN
        /\ Increasing(r.inflight \o LSNs(r.catchup) \o LSNs(r.normal))
        /\ Len(r.normal) <= QMAX /\ Len(r.catchup) <= QMAX
        /\ r.st = "N" => r.catchup = <<>>
        /\ r.st = "S" => r.normal = <<>> /\ r.catchup = <<>> /\ r.inflight = <<>>






CatchupAboveAck ==
    \A t \in Targets : \A j \in jobs[t] :
        (j.term = q[t].term /\ q[t].st = "RF" /\ j.next <= j.to) => lastAck[t] < j.next

TypeOK ==
    /\ playerUp \in BOOLEAN
    /\ epoch \in 1..NFAILURES + 1
    /\ currentLSN \in 0..NMESSAGES
    /\ nfail \in 0..NFAILURES
    /\ nbogus \in 0..NBOGUS
    /\ kicks \subseteq Targets
    /\ \A t \in Targets :
        /\ q[t].st \in {"N", "RF", "FC", "S"}
        /\ sess[t] \in {"none", "ret", "run"}
        /\ applied[t] \in 0..NMESSAGES
        /\ lastAck[t] \in 0..NMESSAGES
        /\ q[t].lastSent \in 0..NMESSAGES
        /\ Len(q[t].inflight) <= WINDOW
        /\ act[t].ep \in 1..epoch


vars == << playerUp, epoch, q, lastAck, currentLSN, snap, kicks, jobs, linkOK, 
           sess, stale, zep, zq, zterm, chan, zchan, acks, tgtUp, applied, 
           appliedSeq, act, refused, goPanic, nfail, nbogus >>

ProcSet == {"main"} \cup {"kickSlow"} \cup ({"fetch"} \X Targets) \cup ({"send"} \X Targets) \cup ({"stale"} \X Targets) \cup ({"zombie"} \X Targets) \cup ({"target"} \X Targets) \cup ({"recv"} \X Targets) \cup ({"engine"} \X Targets) \cup ({"fault"} \X Targets) \cup {"playerCrash"} \cup {"playerRestart"} \cup {"quiet"}

Init == (* Global variables *)
        /\ playerUp = TRUE
        /\ epoch = 1
        /\ q = [t \in Targets |-> QNew(1)]
        /\ lastAck = [t \in Targets |-> 0]
        /\ currentLSN = 0
        /\ snap = NoSnap
        /\ kicks = {}
        /\ jobs = [t \in Targets |-> {}]
        /\ linkOK = [t \in Targets |-> FALSE]
        /\ sess = [t \in Targets |-> "none"]
        /\ stale = [t \in Targets |-> FALSE]
        /\ zep = 0
        /\ zq = [t \in Targets |-> <<>>]
        /\ zterm = [t \in Targets |-> 0]
        /\ chan = [t \in Targets |-> <<>>]
        /\ zchan = [t \in Targets |-> <<>>]
        /\ acks = [t \in Targets |-> {}]
        /\ tgtUp = [t \in Targets |-> TRUE]
        /\ applied = [t \in Targets |-> 0]
        /\ appliedSeq = [t \in Targets |-> <<>>]
        /\ act = [t \in Targets |-> [ep |-> 1, term |-> 1]]
        /\ refused = [t \in Targets |-> FALSE]
        /\ goPanic = FALSE
        /\ nfail = 0
        /\ nbogus = 0

mainFetcher == /\ playerUp /\ mainNext <= NMESSAGES /\ kicks = {}
               /\ IF AtomicDispatch \/ snap # NoSnap
                     THEN /\ LET terms == IF AtomicDispatch THEN [t \in Targets |-> q[t].term] ELSE snap IN
                               /\ kicks' = Slow(mainNext, terms)
                               /\ q' = DispatchQ(mainNext, terms)
                               /\ currentLSN' = mainNext
                               /\ snap' = NoSnap
                     ELSE /\ snap' = [t \in Targets |-> q[t].term]
                          /\ UNCHANGED << q, currentLSN, kicks >>
               /\ UNCHANGED << playerUp, epoch, lastAck, jobs, linkOK, sess, 
                               stale, zep, zq, zterm, chan, zchan, acks, tgtUp, 
                               applied, appliedSeq, act, refused, goPanic, 
                               nfail, nbogus >>

kickSlow == /\ kicks # {}
            /\ linkOK' = [t \in Targets |-> IF t \in kicks /\ sess[t] = "run"
                                            THEN FALSE ELSE linkOK[t]]
            /\ kicks' = {}
            /\ UNCHANGED << playerUp, epoch, q, lastAck, currentLSN, snap, 
                            jobs, sess, stale, zep, zq, zterm, chan, zchan, 
                            acks, tgtUp, applied, appliedSeq, act, refused, 
                            goPanic, nfail, nbogus >>

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
                                                              /\ q' = [q EXCEPT ![t] = QAppend(q[t], Data(j.next), FALSE)]
                                                              /\ jobs' = [jobs EXCEPT ![t] = (jobs[t] \ {j}) \cup {[j EXCEPT !.next = NextFor(t, j.next + 1, j.to)]}]
                                                              /\ UNCHANGED goPanic
                         /\ UNCHANGED << playerUp, epoch, lastAck, currentLSN, 
                                         snap, kicks, linkOK, sess, stale, zep, 
                                         zq, zterm, chan, zchan, acks, tgtUp, 
                                         applied, appliedSeq, act, refused, 
                                         nfail, nbogus >>

sender(self) == /\ playerUp
                /\ LET t == self[2] IN
                     /\ sess[t] = "run" /\ q[t].st # "S" /\ Len(q[t].inflight) < WINDOW
                        /\ QFront(q[t]) # NoMsg
                     /\ LET r == QNextBatch(q[t], MAXBATCH) IN
                          /\ q' = [q EXCEPT ![t] = r.q]
                          /\ IF linkOK[t]
                                THEN /\ chan' = [chan EXCEPT ![t] = Append(chan[t], r.batch)]
                                ELSE /\ TRUE
                                     /\ chan' = chan
                /\ UNCHANGED << playerUp, epoch, lastAck, currentLSN, snap, 
                                kicks, jobs, linkOK, sess, stale, zep, zq, 
                                zterm, zchan, acks, tgtUp, applied, appliedSeq, 
                                act, refused, goPanic, nfail, nbogus >>

staleSender(self) == /\ playerUp /\ stale[self[2]]
                     /\ LET t == self[2] IN
                          \/ /\ q[t].st # "S" /\ Len(q[t].inflight) < WINDOW /\ QFront(q[t]) # NoMsg
                             /\ q' = [q EXCEPT ![t] = QNextBatch(q[t], MAXBATCH).q]
                             /\ stale' = stale
                          \/ /\ stale' = [stale EXCEPT ![t] = FALSE]
                             /\ q' = q
                     /\ UNCHANGED << playerUp, epoch, lastAck, currentLSN, 
                                     snap, kicks, jobs, linkOK, sess, zep, zq, 
                                     zterm, chan, zchan, acks, tgtUp, applied, 
                                     appliedSeq, act, refused, goPanic, nfail, 
                                     nbogus >>

zombieSender(self) == /\ zq[self[2]] # <<>>
                      /\ LET t == self[2] IN
                           LET n == IF Len(zq[t]) < MAXBATCH THEN Len(zq[t]) ELSE MAXBATCH IN
                             /\ zchan' = [zchan EXCEPT ![t] = Append(zchan[t], [ep |-> zep, term |-> zterm[t], b |-> SubSeq(zq[t], 1, n)])]
                             /\ zq' = [zq EXCEPT ![t] = SubSeq(zq[t], n + 1, Len(zq[t]))]
                      /\ UNCHANGED << playerUp, epoch, q, lastAck, currentLSN, 
                                      snap, kicks, jobs, linkOK, sess, stale, 
                                      zep, zterm, chan, acks, tgtUp, applied, 
                                      appliedSeq, act, refused, goPanic, nfail, 
                                      nbogus >>

target(self) == /\ tgtUp[self[2]] /\ (chan[self[2]] # <<>> \/ zchan[self[2]] # <<>>)
                /\ LET t == self[2] IN
                     \/ /\ chan[t] # <<>>
                        /\ LET b == Head(chan[t]) IN
                             /\ refused' = [refused EXCEPT ![t] = refused[t] \/ ~Increasing(<<applied[t]>> \o LSNs(b))]
                             /\ appliedSeq' = [appliedSeq EXCEPT ![t] = appliedSeq[t] \o DataLSNs(b)]
                             /\ applied' = [applied EXCEPT ![t] = b[Len(b)].lsn]
                             /\ acks' = [acks EXCEPT ![t] = {a \in acks[t] : a.term # act[t].term \/ a.bogus}
                                                            \cup {[term |-> act[t].term, lsn |-> b[Len(b)].lsn, bogus |-> FALSE]}]
                             /\ chan' = [chan EXCEPT ![t] = Tail(chan[t])]
                        /\ zchan' = zchan
                     \/ /\ zchan[t] # <<>>
                        /\ LET z == Head(zchan[t]) IN
                             /\ IF OfStream(z, act[t])
                                   THEN /\ refused' = [refused EXCEPT ![t] = refused[t] \/ ~Increasing(<<applied[t]>> \o LSNs(z.b))]
                                        /\ appliedSeq' = [appliedSeq EXCEPT ![t] = appliedSeq[t] \o DataLSNs(z.b)]
                                        /\ applied' = [applied EXCEPT ![t] = z.b[Len(z.b)].lsn]
                                   ELSE /\ TRUE
                                        /\ UNCHANGED << applied, appliedSeq, 
                                                        refused >>
                             /\ zchan' = [zchan EXCEPT ![t] = Tail(zchan[t])]
                        /\ UNCHANGED <<chan, acks>>
                /\ UNCHANGED << playerUp, epoch, q, lastAck, currentLSN, snap, 
                                kicks, jobs, linkOK, sess, stale, zep, zq, 
                                zterm, tgtUp, act, goPanic, nfail, nbogus >>

receiver(self) == /\ playerUp /\ acks[self[2]] # {}
                  /\ LET t == self[2] IN
                       \E a \in acks[t]:
                         \E dup \in (IF DupAcks THEN BOOLEAN ELSE {FALSE}):
                           /\ IF a.term # q[t].term
                                 THEN /\ TRUE
                                      /\ UNCHANGED << q, lastAck, linkOK >>
                                 ELSE /\ IF AckChecks /\ a.lsn > lastAck[t] /\ a.lsn > q[t].lastSent
                                            THEN /\ linkOK' = [linkOK EXCEPT ![t] = FALSE]
                                                 /\ UNCHANGED << q, lastAck >>
                                            ELSE /\ lastAck' = [lastAck EXCEPT ![t] = Max(lastAck[t], a.lsn)]
                                                 /\ q' = [q EXCEPT ![t] = QAck(q[t], a.lsn)]
                                                 /\ UNCHANGED linkOK
                           /\ IF ~dup
                                 THEN /\ acks' = [acks EXCEPT ![t] = acks[t] \ {a}]
                                 ELSE /\ TRUE
                                      /\ acks' = acks
                  /\ UNCHANGED << playerUp, epoch, currentLSN, snap, kicks, 
                                  jobs, sess, stale, zep, zq, zterm, chan, 
                                  zchan, tgtUp, applied, appliedSeq, act, 
                                  refused, goPanic, nfail, nbogus >>

engine(self) == /\ playerUp
                /\ LET t == self[2] IN
                     \/ /\ ~linkOK[t] /\ q[t].st # "S"
                        /\ q' = [q EXCEPT ![t] = QSuspend(q[t])]
                        /\ UNCHANGED <<lastAck, jobs, linkOK, sess, stale, chan, tgtUp, act>>
                     \/ /\ ~linkOK[t] /\ q[t].st = "S" /\ sess[t] \in {"none", "run"}
                        /\ LET nt == q[t].term + 1 IN
                             /\ tgtUp' = [tgtUp EXCEPT ![t] = TRUE]
                             /\ stale' = [stale EXCEPT ![t] = ~UseTerms /\ nt > 2]
                             /\ chan' = [chan EXCEPT ![t] = <<>>]
                             /\ act' = [act EXCEPT ![t] = [ep |-> epoch, term |-> nt]]
                             /\ linkOK' = [linkOK EXCEPT ![t] = TRUE]
                             /\ sess' = [sess EXCEPT ![t] = "ret"]
                             /\ lastAck' = [lastAck EXCEPT ![t] = applied[t]]
                             /\ IF applied[t] >= currentLSN
                                   THEN /\ q' = [q EXCEPT ![t] = [QReturn(q[t]) EXCEPT !.st = "N"]]
                                        /\ jobs' = jobs
                                   ELSE /\ q' = [q EXCEPT ![t] = QReturn(q[t])]
                                        /\ jobs' = [jobs EXCEPT ![t] =        jobs[t] \cup
                                                                       {[term |-> nt, to |-> currentLSN,
                                                                         next |-> NextFor(t, applied[t] + 1, currentLSN)]}]
                     \/ /\ sess[t] = "ret"
                        /\ sess' = [sess EXCEPT ![t] = "run"]
                        /\ IF "session" \in KICK /\ q[t].st = "S"
                              THEN /\ linkOK' = [linkOK EXCEPT ![t] = FALSE]
                              ELSE /\ TRUE
                                   /\ UNCHANGED linkOK
                        /\ UNCHANGED <<q, lastAck, jobs, stale, chan, tgtUp, act>>
                     \/ /\ "ticker" \in KICK /\ sess[t] = "run" /\ linkOK[t] /\ q[t].st = "S"
                        /\ linkOK' = [linkOK EXCEPT ![t] = FALSE]
                        /\ UNCHANGED <<q, lastAck, jobs, sess, stale, chan, tgtUp, act>>
                     \/ /\ q[t].st = "N" /\ lastAck[t] < currentLSN
                           /\ q[t].normal = <<>> /\ q[t].catchup = <<>> /\ q[t].inflight = <<>>
                        /\ q' = [q EXCEPT ![t] = QAppend(q[t], Marker(currentLSN), TRUE)]
                        /\ UNCHANGED <<lastAck, jobs, linkOK, sess, stale, chan, tgtUp, act>>
                /\ UNCHANGED << playerUp, epoch, currentLSN, snap, kicks, zep, 
                                zq, zterm, zchan, acks, applied, appliedSeq, 
                                refused, goPanic, nfail, nbogus >>

targetFault(self) == /\ tgtUp[self[2]]
                     /\ LET t == self[2] IN
                          \/ /\ nfail < NFAILURES
                             /\ \/ /\ tgtUp' = [tgtUp EXCEPT ![t] = FALSE]
                                   /\ chan' = [chan EXCEPT ![t] = <<>>]
                                   /\ zchan' = [zchan EXCEPT ![t] = <<>>]
                                   /\ zq' = [zq EXCEPT ![t] = <<>>]
                                \/ /\ linkOK[t]
                                   /\ UNCHANGED <<zq, chan, zchan, tgtUp>>
                             /\ linkOK' = [linkOK EXCEPT ![t] = FALSE]
                             /\ nfail' = nfail + 1
                             /\ UNCHANGED <<acks, nbogus>>
                          \/ /\ nbogus < NBOGUS /\ playerUp /\ act[t].ep = epoch /\ applied[t] < NMESSAGES
                             /\ \E l \in applied[t] + 1..NMESSAGES:
                                  acks' = [acks EXCEPT ![t] = acks[t] \cup {[term |-> act[t].term, lsn |-> l, bogus |-> TRUE]}]
                             /\ nbogus' = nbogus + 1
                             /\ UNCHANGED <<linkOK, zq, chan, zchan, tgtUp, nfail>>
                     /\ UNCHANGED << playerUp, epoch, q, lastAck, currentLSN, 
                                     snap, kicks, jobs, sess, stale, zep, 
                                     zterm, applied, appliedSeq, act, refused, 
                                     goPanic >>

playerCrash == /\ playerUp /\ nfail < NFAILURES
               /\ \E zombie \in (IF ZOMBIES THEN BOOLEAN ELSE {FALSE}):
                    zq' = [t \in Targets |-> IF zombie /\ linkOK[t] /\ sess[t] = "run"
                                             THEN Unsent(q[t]) ELSE <<>>]
               /\ zchan' = [t \in Targets |-> zchan[t] \o Tag(chan[t], act[t])]
               /\ zterm' = [t \in Targets |-> q[t].term]
               /\ zep' = epoch
               /\ epoch' = epoch + 1
               /\ playerUp' = FALSE
               /\ nfail' = nfail + 1
               /\ q' = [t \in Targets |-> QNew(1)]
               /\ lastAck' = [t \in Targets |-> 0]
               /\ currentLSN' = 0
               /\ snap' = NoSnap
               /\ kicks' = {}
               /\ jobs' = [t \in Targets |-> {}]
               /\ linkOK' = [t \in Targets |-> FALSE]
               /\ sess' = [t \in Targets |-> "none"]
               /\ stale' = [t \in Targets |-> FALSE]
               /\ chan' = [t \in Targets |-> <<>>]
               /\ acks' = [t \in Targets |-> {}]
               /\ UNCHANGED << tgtUp, applied, appliedSeq, act, refused, 
                               goPanic, nbogus >>

playerRestart == /\ ~playerUp
                 /\ LET up == {t \in Targets : tgtUp[t]} IN
                      /\ act' = [t \in Targets |-> IF t \in up THEN [ep |-> epoch, term |-> 1] ELSE act[t]]
                      /\ currentLSN' = (IF up = {} THEN NMESSAGES ELSE Min({applied[t] : t \in up}))
                 /\ playerUp' = TRUE
                 /\ UNCHANGED << epoch, q, lastAck, snap, kicks, jobs, linkOK, 
                                 sess, stale, zep, zq, zterm, chan, zchan, 
                                 acks, tgtUp, applied, appliedSeq, refused, 
                                 goPanic, nfail, nbogus >>

quiet == /\ AllDelivered
         /\ UNCHANGED << playerUp, epoch, q, lastAck, currentLSN, snap, kicks, 
                         jobs, linkOK, sess, stale, zep, zq, zterm, chan, 
                         zchan, acks, tgtUp, applied, appliedSeq, act, refused, 
                         goPanic, nfail, nbogus >>

Next == mainFetcher \/ kickSlow \/ playerCrash \/ playerRestart \/ quiet
           \/ (\E self \in {"fetch"} \X Targets: recoveryFetcher(self))
           \/ (\E self \in {"send"} \X Targets: sender(self))
           \/ (\E self \in {"stale"} \X Targets: staleSender(self))
           \/ (\E self \in {"zombie"} \X Targets: zombieSender(self))
           \/ (\E self \in {"target"} \X Targets: target(self))
           \/ (\E self \in {"recv"} \X Targets: receiver(self))
           \/ (\E self \in {"engine"} \X Targets: engine(self))
           \/ (\E self \in {"fault"} \X Targets: targetFault(self))

Spec == /\ Init /\ [][Next]_vars
        /\ WF_vars(mainFetcher)
        /\ WF_vars(kickSlow)
        /\ \A self \in {"fetch"} \X Targets : WF_vars(recoveryFetcher(self))
        /\ \A self \in {"send"} \X Targets : WF_vars(sender(self))
        /\ \A self \in {"stale"} \X Targets : WF_vars(staleSender(self))
        /\ \A self \in {"zombie"} \X Targets : WF_vars(zombieSender(self))
        /\ \A self \in {"target"} \X Targets : WF_vars(target(self))
        /\ \A self \in {"recv"} \X Targets : WF_vars(receiver(self))
        /\ \A self \in {"engine"} \X Targets : WF_vars(engine(self))
        /\ WF_vars(playerRestart)

\* END TRANSLATION 
\* END TRANSLATION 
\* END TRANSLATION 
\* END TRANSLATION

(* Once failures stop (they are bounded), every target has all its messages. *)
EventuallyAllApplied == <>[]AllDelivered

=============================================================================
