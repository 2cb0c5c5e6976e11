----------------------------- MODULE PlayerGroup -----------------------------
(***************************************************************************)
(* The LogPlayer group (issue #13): several LogPlayers share the targets.  *)
(* The LogStore (one replicated state machine; its apply is deterministic) *)
(* keeps the group: members join and renew a lease measured in LOG time    *)
(* (the timestamps of the leader's entries), each target is assigned to at *)
(* most one live member, and every change of owner takes a new fencing     *)
(* token from the NextEpoch counter.  A player opens a Deliver stream to a *)
(* target it owns with the target's token as its Hello epoch; the target   *)
(* persists the highest epoch it accepted with its applied LSN and refuses *)
(* an older one (target/applier.go accept: STALE_EPOCH).  A player stops   *)
(* delivering when its local lease deadline (the time of its last renewal  *)
(* + LEASE - MARGIN) passes, but that check runs before the send and a     *)
(* player may stop for any time in between (a pause, a wrong clock): the   *)
(* token is the backstop.                                                  *)
(*                                                                         *)
(* The dispatcher, its queues, acks and windows are LogPlayer.tla's        *)
(* business: here a stream is the sequence of the target's LSNs from the   *)
(* HelloAck's applied LSN on (what LogPlayer.tla proves a session sends).  *)
(* See README.md ("PlayerGroup.tla") for the mapping to Go.                *)
(*                                                                         *)
(* Safety: ExactlyOnceInOrder (every target applied exactly its topics'    *)
(* LSNs up to its applied LSN, in order, each once), NoStaleApply (no      *)
(* batch of a stream of an older assignment than one whose Hello reached   *)
(* the target is ever applied), StoreAssignment (one live owner per        *)
(* target, tokens from one counter), LocalLeaseExclusive (at most one      *)
(* player's local lease check passes for a target at any log time).       *)
(* Liveness: EventuallyAllApplied, with weak fairness for every step but   *)
(* the failures (pauses, target crashes, rebalancing moves).               *)
(***************************************************************************)
EXTENDS Naturals, Sequences, FiniteSets, TLC

CONSTANTS
    Players,     \* the LogPlayer processes of the group
    Targets,     \* the registered targets
    Sub,         \* Sub[t]: the topics target t subscribes to
    TxnTopics,   \* TxnTopics[l]: the topics transaction (LSN) l writes
    NMESSAGES,   \* committed transactions: LSNs 1..NMESSAGES
    LEASE,       \* the lease, in log time units
    MARGIN,      \* the player's local safety margin (0 <= MARGIN < LEASE)
    MAXTIME,     \* log time stops advancing here (bounds the model)
    NFAILURES,   \* pauses of a player and crashes of a target, in all
    NMOVES,      \* rebalancing moves of a target between live members
    WINDOW,      \* batches in flight per stream
    TokenCheck,  \* FALSE: the Broken variant: the target accepts every Hello
    BumpToken    \* FALSE: the Broken variant: a new owner keeps the token

ASSUME LEASE \in Nat \ {0} /\ MARGIN \in Nat /\ MARGIN < LEASE
ASSUME MAXTIME \in Nat /\ NFAILURES \in Nat /\ NMOVES \in Nat
ASSUME WINDOW \in Nat \ {0} /\ TokenCheck \in BOOLEAN /\ BumpToken \in BOOLEAN

(* The models of the configs.                                             *)
OneTarget == {"A"}
OneSub == [t \in OneTarget |-> {"x"}]
TwoTargets == {"A", "B"}
TwoSub == [t \in TwoTargets |-> IF t = "A" THEN {"x"} ELSE {"y"}]
ModelTxnTopics == [l \in 1..NMESSAGES |->
                     CASE l % 3 = 1 -> {"x", "y"}
                       [] l % 3 = 2 -> {"x"}
                       [] OTHER     -> {"y"}]

None == "none"
Max(a, b) == IF a >= b THEN a ELSE b
Min(S) == CHOOSE x \in S : \A y \in S : x <= y

DestTab == [l \in 1..NMESSAGES |-> {t \in Targets : TxnTopics[l] \cap Sub[t] # {}}]
Dest(l) == DestTab[l]

RECURSIVE MsgsUpTo(_, _)
MsgsUpTo(t, n) == IF n = 0 THEN <<>>
                  ELSE IF t \in Dest(n) THEN Append(MsgsUpTo(t, n - 1), n)
                  ELSE MsgsUpTo(t, n - 1)
MsgsTab == [t \in Targets |-> [n \in 0..NMESSAGES |-> MsgsUpTo(t, n)]]
Msgs(t, n) == MsgsTab[t][n]

(* The first of t's LSNs at or after from, or NMESSAGES + 1.               *)
NextForTab == [t \in Targets, from \in 1..NMESSAGES + 2 |->
                 LET S == {l \in from..NMESSAGES : t \in Dest(l)}
                 IN  IF S = {} THEN NMESSAGES + 1 ELSE Min(S)]
NextFor(t, from) == NextForTab[t, from]
LastFor(t) == LET S == {l \in 1..NMESSAGES : t \in Dest(l)}
              IN  IF S = {} THEN 0 ELSE CHOOSE l \in S : \A m \in S : m <= l

NoHold == [tok |-> 0, gen |-> 0]
NoStream == [sess |-> 0, tok |-> 0, gen |-> 0, st |-> "none", pos |-> 0, net |-> <<>>]
NoActive == [p |-> None, sess |-> 0]
Hello == 0   \* the Hello in a stream's FIFO (LSNs are >= 1)

VARIABLES
    \* ---- the LogStore's group state (Raft-committed) ----
    now,       \* log time: the timestamp of the newest applied entry
    lease,     \* lease[p]: log time the member's lease ends (0: not a member)
    owner,     \* owner[t]: the member t is assigned to, or None
    tok,       \* tok[t]: t's fencing token (0: never assigned)
    counter,   \* the NextEpoch counter tokens are taken from
    \* ---- each player's memory ----
    paused,    \* the process is stopped (SIGSTOP, GC, VM pause)
    dl,        \* its local lease deadline (log time of the renewal + LEASE - MARGIN)
    ok,        \* its last local lease check passed
    held,      \* held[p][t]: the assignment of t its last heartbeat answered
    str,       \* str[p][t]: its Deliver stream to t (FIFO net: Hello, then LSNs)
    \* ---- targets ----
    up,        \* the target process runs
    applied,   \* durable: the applied LSN
    tokHi,     \* durable with it: the highest epoch (token) accepted
    active,    \* volatile: the stream of the last accepted Hello, [p, sess]
    sessHi,    \* volatile: that Hello's session
    \* ---- ghosts and bounds ----
    gen,       \* gen[t]: how many times t's owner changed (token or not)
    gseen,     \* gseen[t]: the newest assignment (gen) whose Hello reached t
    appliedSeq,\* the LSNs t applied, in order
    refused,   \* a batch at or below t's applied LSN arrived on its active stream
    stale,     \* a batch of an older assignment than gseen[t] was applied
    nfail, nmoves

store   == <<now, lease, owner, tok, counter>>
player  == <<paused, dl, ok, held, str>>
target  == <<up, applied, tokHi, active, sessHi>>
ghost   == <<gen, gseen, appliedSeq, refused, stale, nfail, nmoves>>
vars    == <<store, player, target, ghost>>

Init ==
    /\ now = 0
    /\ lease = [p \in Players |-> 0]
    /\ owner = [t \in Targets |-> None]
    /\ tok = [t \in Targets |-> 0]
    /\ counter = 0
    /\ paused = [p \in Players |-> FALSE]
    /\ dl = [p \in Players |-> 0]
    /\ ok = [p \in Players |-> FALSE]
    /\ held = [p \in Players |-> [t \in Targets |-> NoHold]]
    /\ str = [p \in Players |-> [t \in Targets |-> NoStream]]
    /\ up = [t \in Targets |-> TRUE]
    /\ applied = [t \in Targets |-> 0]
    /\ tokHi = [t \in Targets |-> 0]
    /\ active = [t \in Targets |-> NoActive]
    /\ sessHi = [t \in Targets |-> 0]
    /\ gen = [t \in Targets |-> 0]
    /\ gseen = [t \in Targets |-> 0]
    /\ appliedSeq = [t \in Targets |-> <<>>]
    /\ refused = [t \in Targets |-> FALSE]
    /\ stale = [t \in Targets |-> FALSE]
    /\ nfail = 0
    /\ nmoves = 0

Live == {p \in Players : lease[p] > now}

(***************************************************************************)
(* The LogStore.  Every step is one Raft entry applied by every replica.  *)
(***************************************************************************)

\* An entry with a later timestamp: log time advances, and the apply ends
\* every lease that ran out; the targets of those members lose their owner.
Tick ==
    /\ now < MAXTIME
    /\ LET T == now + 1
           gone == {p \in Players : lease[p] # 0 /\ lease[p] <= T}
       IN  /\ now' = T
           /\ lease' = [p \in Players |-> IF p \in gone THEN 0 ELSE lease[p]]
           /\ owner' = [t \in Targets |-> IF owner[t] \in gone THEN None ELSE owner[t]]
    /\ UNCHANGED <<tok, counter, player, target, ghost>>

\* A new owner for t: the next value of the NextEpoch counter is its token.
NewOwner(t, p) ==
    /\ owner' = [owner EXCEPT ![t] = p]
    /\ counter' = counter + 1
    /\ tok' = [tok EXCEPT ![t] = IF BumpToken \/ @ = 0 THEN counter + 1 ELSE @]
    /\ gen' = [gen EXCEPT ![t] = @ + 1]

\* The apply assigns a target without an owner to a live member (any: the
\* Go apply's deterministic, balanced choice is one of these behaviours).
Assign(t, p) ==
    /\ owner[t] = None /\ p \in Live
    /\ NewOwner(t, p)
    /\ UNCHANGED <<now, lease, player, target, gseen, appliedSeq, refused, stale, nfail, nmoves>>

\* Rebalancing moves a target from a live owner to another live member
\* (sticky otherwise): the old owner learns it at its next heartbeat.
Move(t, p) ==
    /\ nmoves < NMOVES
    /\ owner[t] # None /\ owner[t] # p /\ p \in Live
    /\ NewOwner(t, p)
    /\ nmoves' = nmoves + 1
    /\ UNCHANGED <<now, lease, player, target, gseen, appliedSeq, refused, stale, nfail>>

(***************************************************************************)
(* The players.                                                            *)
(***************************************************************************)

\* Heartbeat: the player's request is applied at log time now (joining, or
\* renewing); the answer carries its assignments.  The player's deadline
\* counts from the renewal (Go: from the request's send time, which is no
\* later, so a real deadline is no later than this one).  A stream to a
\* target whose token changed or that it lost is closed: no more sends, what
\* is in flight still arrives.
Heartbeat(p) ==
    /\ ~paused[p]
    /\ lease' = [lease EXCEPT ![p] = now + LEASE]
    /\ LET h == [t \in Targets |-> IF owner[t] = p THEN [tok |-> tok[t], gen |-> gen[t]] ELSE NoHold]
       IN  /\ held' = [held EXCEPT ![p] = h]
           /\ str' = [str EXCEPT ![p] = [t \in Targets |->
                        IF h[t].tok # held[p][t].tok /\ str[p][t].st \in {"hello", "open"}
                        THEN [str[p][t] EXCEPT !.st = "closed"]
                        ELSE str[p][t]]]
    /\ dl' = [dl EXCEPT ![p] = now + LEASE - MARGIN]
    /\ ok' = [ok EXCEPT ![p] = TRUE]
    /\ UNCHANGED <<now, owner, tok, counter, paused, target, ghost>>

\* The local lease check, taken before the sends it allows: it fails once
\* log time reached the deadline.  Between a passing check and a send the
\* player may stop for any time (interleaving, Pause).
Check(p) ==
    /\ ~paused[p] /\ ok[p] /\ now >= dl[p]
    /\ ok' = [ok EXCEPT ![p] = FALSE]
    /\ UNCHANGED <<store, paused, dl, held, str, target, ghost>>

\* A new Deliver stream to a target the player holds, with its token as the
\* Hello's epoch and the next session.  The previous stream ended (or was
\* never opened) and nothing of it is in flight any more.
Open(p, t) ==
    /\ ~paused[p] /\ ok[p] /\ held[p][t].tok # 0
    /\ str[p][t].st \in {"none", "dead", "closed"} /\ str[p][t].net = <<>>
    /\ str' = [str EXCEPT ![p][t] = [sess |-> @.sess + 1, tok |-> held[p][t].tok,
                                      gen |-> held[p][t].gen, st |-> "hello",
                                      pos |-> 0, net |-> <<Hello>>]]
    /\ UNCHANGED <<store, paused, dl, ok, held, target, ghost>>

\* The next of t's LSNs on an open stream, while the lease check holds and
\* the window has room.
Send(p, t) ==
    LET s == str[p][t] IN
    /\ ~paused[p] /\ ok[p]
    /\ s.st = "open" /\ s.pos <= NMESSAGES /\ Len(s.net) < WINDOW
    /\ str' = [str EXCEPT ![p][t] = [s EXCEPT !.net = Append(@, s.pos),
                                              !.pos = NextFor(t, s.pos + 1)]]
    /\ UNCHANGED <<store, paused, dl, ok, held, target, ghost>>

Pause(p) ==
    /\ ~paused[p] /\ nfail < NFAILURES
    /\ paused' = [paused EXCEPT ![p] = TRUE]
    /\ nfail' = nfail + 1
    /\ UNCHANGED <<store, dl, ok, held, str, target, gen, gseen, appliedSeq, refused, stale, nmoves>>

Resume(p) ==
    /\ paused[p]
    /\ paused' = [paused EXCEPT ![p] = FALSE]
    /\ UNCHANGED <<store, dl, ok, held, str, target, ghost>>

(***************************************************************************)
(* The targets (the target SDK: target/applier.go).                       *)
(***************************************************************************)

\* The Hello at the head of p's stream reaches t.  accept: an epoch below
\* the persisted highest is refused (STALE_EPOCH), and within the same
\* epoch a session below the last accepted one (SUPERSEDED); a higher epoch
\* is persisted before the HelloAck; the accepted stream becomes the active
\* one and the previous active stream ends.  The HelloAck (applied LSN)
\* positions the player's stream.  A refused player stops delivering to t
\* until a heartbeat gives it t again (failFenced).
TakeHello(p, t) ==
    LET s == str[p][t]
        accept == ~TokenCheck
                  \/ (s.tok > tokHi[t] \/ (s.tok = tokHi[t] /\ s.sess >= sessHi[t]))
    IN
    /\ up[t] /\ s.net # <<>> /\ Head(s.net) = Hello
    /\ gseen' = [gseen EXCEPT ![t] = Max(@, s.gen)]
    /\ IF accept
       THEN /\ tokHi' = [tokHi EXCEPT ![t] = IF TokenCheck THEN Max(@, s.tok) ELSE @]
            /\ sessHi' = [sessHi EXCEPT ![t] = s.sess]
            /\ active' = [active EXCEPT ![t] = [p |-> p, sess |-> s.sess]]
            /\ str' = [q \in Players |-> [u \in Targets |->
                         IF u = t /\ q = p
                         THEN [s EXCEPT !.st = IF @ = "closed" THEN @ ELSE "open", !.net = Tail(@),
                                        !.pos = NextFor(t, applied[t] + 1)]
                         ELSE IF u = t /\ active[t].p = q
                                 /\ active[t].sess = str[q][t].sess
                         THEN [str[q][t] EXCEPT !.st = "dead", !.net = <<>>]
                         ELSE str[q][u]]]
            /\ UNCHANGED held
       ELSE /\ str' = [str EXCEPT ![p][t] = [s EXCEPT !.st = "dead", !.net = <<>>]]
            /\ held' = [held EXCEPT ![p][t] = NoHold]
            /\ UNCHANGED <<tokHi, sessHi, active>>
    /\ UNCHANGED <<store, paused, dl, ok, up, applied, gen, appliedSeq, refused, stale, nfail, nmoves>>

\* The batch at the head of p's stream reaches t: applied (with the applied
\* LSN, in one durable step) if its stream is the active one, dropped if it
\* is not (a stream that was taken over).
TakeBatch(p, t) ==
    LET s == str[p][t]
        l == Head(s.net)
    IN
    /\ up[t] /\ s.net # <<>> /\ l # Hello
    /\ IF active[t] = [p |-> p, sess |-> s.sess]
       THEN IF l <= applied[t]
            THEN /\ refused' = [refused EXCEPT ![t] = TRUE]   \* CONTINUITY
                 /\ str' = [str EXCEPT ![p][t] = [s EXCEPT !.st = "dead", !.net = <<>>]]
                 /\ UNCHANGED <<applied, appliedSeq, stale>>
            ELSE /\ applied' = [applied EXCEPT ![t] = l]
                 /\ appliedSeq' = [appliedSeq EXCEPT ![t] = Append(@, l)]
                 /\ stale' = [stale EXCEPT ![t] = @ \/ s.gen < gseen[t]]
                 /\ str' = [str EXCEPT ![p][t].net = Tail(@)]
                 /\ UNCHANGED refused
       ELSE /\ str' = [str EXCEPT ![p][t].net = Tail(@)]
            /\ UNCHANGED <<applied, appliedSeq, stale, refused>>
    /\ UNCHANGED <<store, paused, dl, ok, held, up, tokHi, active, sessHi,
                   gen, gseen, nfail, nmoves>>

\* A target crash: its streams end (what is in flight is lost), its memory
\* (active stream, session) is gone; applied LSN and token survive.
Crash(t) ==
    /\ up[t] /\ nfail < NFAILURES
    /\ up' = [up EXCEPT ![t] = FALSE]
    /\ active' = [active EXCEPT ![t] = NoActive]
    /\ sessHi' = [sessHi EXCEPT ![t] = 0]
    /\ str' = [p \in Players |-> [str[p] EXCEPT ![t] =
                 IF @.st \in {"hello", "open", "closed"} THEN [@ EXCEPT !.st = "dead", !.net = <<>>] ELSE @]]
    /\ nfail' = nfail + 1
    /\ UNCHANGED <<store, paused, dl, ok, held, applied, tokHi, gen, gseen,
                   appliedSeq, refused, stale, nmoves>>

Restart(t) ==
    /\ ~up[t]
    /\ up' = [up EXCEPT ![t] = TRUE]
    /\ UNCHANGED <<store, player, applied, tokHi, active, sessHi, ghost>>

Next ==
    \/ Tick
    \/ \E t \in Targets, p \in Players : Assign(t, p) \/ Move(t, p)
    \/ \E p \in Players : Heartbeat(p) \/ Check(p) \/ Pause(p) \/ Resume(p)
    \/ \E p \in Players, t \in Targets : Open(p, t) \/ Send(p, t) \/ TakeHello(p, t) \/ TakeBatch(p, t)
    \/ \E t \in Targets : Crash(t) \/ Restart(t)

Fairness ==
    /\ WF_vars(Tick)
    /\ \A t \in Targets : WF_vars(\E p \in Players : Assign(t, p))
    /\ \A p \in Players : WF_vars(Heartbeat(p)) /\ WF_vars(Check(p)) /\ WF_vars(Resume(p))
    /\ \A p \in Players, t \in Targets :
          WF_vars(Open(p, t)) /\ WF_vars(Send(p, t)) /\ WF_vars(TakeHello(p, t)) /\ WF_vars(TakeBatch(p, t))
    /\ \A t \in Targets : WF_vars(Restart(t))

Spec == Init /\ [][Next]_vars /\ Fairness

(***************************************************************************)
(* Properties.                                                             *)
(***************************************************************************)

TypeOK ==
    /\ now \in 0..MAXTIME /\ counter \in Nat
    /\ \A p \in Players : lease[p] \in 0..MAXTIME + LEASE
    /\ \A t \in Targets : owner[t] \in Players \cup {None}
    /\ \A p \in Players, t \in Targets :
          str[p][t].st \in {"none", "hello", "open", "closed", "dead"}
          /\ Len(str[p][t].net) <= WINDOW

\* Exactly once, in order, no hole: t applied exactly its LSNs up to its
\* applied LSN, and no batch at or below it reached its active stream.
ExactlyOnceInOrder ==
    \A t \in Targets : appliedSeq[t] = Msgs(t, applied[t]) /\ ~refused[t]

\* Fencing: no batch of a stream of an assignment older than one whose
\* Hello reached the target is applied (gen is the ghost count of owner
\* changes, so this holds the Broken variant without tokens to account too).
NoStaleApply == \A t \in Targets : ~stale[t]

\* The target's state agrees with the store's: its highest token is never
\* above the store's; the active stream (while its player has not replaced
\* it) carries the highest token.
TokenFencing ==
    \A t \in Targets :
        /\ tokHi[t] <= tok[t]
        /\ (active[t] # NoActive /\ str[active[t].p][t].sess = active[t].sess)
               => str[active[t].p][t].tok = tokHi[t]

\* The store's assignment: at most one owner (owner is a function), always
\* a live member; tokens come from the one counter.
StoreAssignment ==
    \A t \in Targets :
        /\ owner[t] # None => owner[t] \in Live
        /\ tok[t] <= counter

\* The lease arithmetic: at any log time, at most one player whose local
\* deadline has not passed holds a target's current token (a player that
\* lost its lease has passed its deadline; one whose target was moved holds
\* an older token).  The lease check is a first line only: it runs before
\* the sends it allows, and the player may stop in between.
LocalLeaseExclusive ==
    \A t \in Targets, p, q \in Players :
        (p # q /\ held[p][t].tok = tok[t] /\ held[q][t].tok = tok[t] /\ tok[t] # 0)
            => (now >= dl[p] \/ now >= dl[q])

AllApplied == \A t \in Targets : applied[t] = LastFor(t)
EventuallyAllApplied == <>[]AllApplied

=============================================================================
