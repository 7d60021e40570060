/*
 * lease.pml: Spool's lease protocol, for the Spin model checker.
 *
 * One job row, two workers and the maintenance leader's rescuer, on a
 * discrete clock. README.md in this directory maps every part of the model
 * to the code it describes; check.sh runs Spin on it and on the broken
 * variants, which must fail.
 *
 * Time: the clock ticks only when no process can take a step (Promela's
 * timeout), so every database statement and every local decision takes no
 * time, and time passes only while processes wait: for a poll, a
 * heartbeat, a handler's work, or a pause. The database clock and the
 * workers' clocks run at one rate (a worker only ever compares durations
 * it measured itself, never its clock with the database's).
 *
 * Faults (at most MAXF per run, spent anywhere): a worker pauses for one
 * tick or for longer than a lease (SIGSTOP, a VM freeze, a long GC), dies
 * and comes back with nothing in memory (kill -9 and a restart), or loses
 * a claim's reply (connection cut after the claim committed). With
 * -DASYNC_CLAIMS the database server may also crash (see below).
 *
 * -DASYNC_CLAIMS: PostgreSQL with spool_claim_commit=async. A claim's
 * commit does not wait for its WAL flush, so a crash can undo it while its
 * worker believes it holds the job: the row is back as it was before the
 * claim (pending, with the fence it had). Every other write about a job
 * (heartbeat, finish, release, rescue) commits synchronously, and WAL is
 * flushed in order, so each of them also makes the claims before it
 * durable: only a job's last claim can be lost. Fences carry an epoch
 * (migration 011_claim_epoch.sql): a crash empties the unlogged copy of
 * the epoch, and the next claim moves the epoch on in a transaction that
 * commits synchronously, so its fence is the new epoch's first and above
 * every fence a lost claim gave out. A crash takes one fault of the budget.
 *
 * Properties, checked as assertions:
 *   no_start_after_lease_ended   a handler starts only on a lease that is
 *                                current (its fence) and not over;
 *   no_stale_completion          a completion is accepted only from the
 *                                claim that holds the job now;
 *   no_stale_heartbeat           a heartbeat extends only the lease of the
 *                                claim that holds the job now;
 *   no_start_after_done          a handler never starts after the job's
 *                                completion committed;
 *   no_two_live_leases           two handlers never both run on leases
 *                                that have not ended;
 *   tx_effects_at_most_once      effects written in the completing
 *                                transaction (CompleteTx) commit once;
 *   job_done_in_time             the job completes before MAXT whatever
 *                                faults happen (no job is lost);
 * plus Spin's own check that no process is left blocked at the end.
 *
 * Broken variants (each must make check.sh's Spin run fail):
 *   -DBROKEN_CLAIM_TIME    the start window is judged from when the claim's
 *                          reply arrived, not from when it was sent;
 *   -DBROKEN_NO_FENCE      heartbeats and completions match the job by id
 *                          and state, not by fence;
 *   -DBROKEN_RESCUE_EARLY  the rescuer takes back leases with less than
 *                          half their time left instead of ended ones;
 *   -DBROKEN_NO_RESCUE     the rescuer never runs, so a dead worker's job
 *                          stays leased for ever;
 * and with -DASYNC_CLAIMS:
 *   -DBROKEN_NO_EPOCH      fences do not carry the epoch: the claim after a
 *                          crash gives out the lost claim's fence again;
 *   -DBROKEN_EPOCH_ASYNC   the claim that moves the epoch on commits
 *                          asynchronously too, so a second crash can undo
 *                          the epoch's move with the claim.
 *
 * What async claims give up, by design: the handler of a claim a crash
 * undid may start (its start rule only measures time) and runs beside the
 * job's next lease until its next heartbeat is rejected. With
 * -DASYNC_CLAIMS, no_start_after_lease_ended, no_start_after_done and
 * no_two_live_leases therefore exempt a worker whose claim was undone
 * (undone[w]); every other property holds as stated. -DSTRICT_DONE drops
 * the exemption from no_start_after_done, and that run fails: such a
 * handler can start after the job's next claim completed it.
 */

#define L      6   /* lease length in ticks (Config.LeaseDuration) */
#define HB     2   /* heartbeat interval: a third of the lease */
#define HALF   3   /* start window: half the lease */
#define RESCUE 2   /* the rescuer's interval */
#define LONG   8   /* a pause past a lease and the next rescue */
#define MAXF   2   /* faults per run */
#define MAXT   70  /* the job must be done by then */
#define NW     2   /* workers */

mtype = { AVAILABLE, RUNNING, DONE };

/* The job row, as the database holds it. */
mtype job_state = AVAILABLE;
byte job_fence = 0;   /* moved on by every claim (next_fence) */
byte job_lease = 0;   /* leased_until, on the database clock */
byte job_by = 0;      /* claim id of the lease holder (leased_by), 0 none */

byte now = 0;
byte faults = 0;
byte claims = 0;      /* claim ids handed out: unique per claim call */
byte alive = NW + 1;  /* workers and rescuer still running */

/* Observations for the properties, not part of the protocol. */
bool running[NW];     /* a handler is running in this worker */
byte heldUntil[NW];   /* the lease end this worker was last told */
byte txEffects = 0;   /* effects committed by CompleteTx transactions */

#ifdef ASYNC_CLAIMS
/* The server's durable state, as far as it differs from what it serves. */
byte epoch = 0;         /* spool_epoch: moved on, durably, after a crash */
bool epochLive = true;  /* spool_epoch_live: unlogged, so a crash empties it */
bool dirty = false;     /* the row's last write is a claim not yet flushed */
bool asyncTx = false;   /* within a claim: its transaction commits asynchronously */
bool crashChecked = false; /* the server passed its chance to crash this tick */
byte oldFence = 0;      /* the row's fence before that claim: what a crash restores */
#ifdef BROKEN_EPOCH_ASYNC
bool bumpDirty = false; /* the epoch's last move is not yet flushed */
#define unflushed (dirty || bumpDirty)
#else
#define unflushed dirty
#endif
/* Observations: the claim each worker sent last, and whether a crash
 * undid it. */
byte claimOf[NW];
bool undone[NW];
#define exempt(w) undone[w]
#else
#define exempt(w) false
#endif

#define two_live_leases (running[0] && running[1] && heldUntil[0] >= now && heldUntil[1] >= now && !exempt(0) && !exempt(1))
#define tx_effects_at_most_once (txEffects <= 1)
#define lease_current(f) (job_state == RUNNING && job_fence == (f) && now <= job_lease)

#ifdef BROKEN_NO_FENCE
#define holds(f) (job_state == RUNNING)
#else
#define holds(f) (job_state == RUNNING && job_fence == (f))
#endif

/* A claim's fence: spool_next_fence(fence, epoch), the epoch in the high
 * bits (here a multiple of EB: no run claims the job EB times). */
#define EB 16
#if defined(ASYNC_CLAIMS) && !defined(BROKEN_NO_EPOCH)
#define next_fence(f) ((f) / EB >= epoch -> (f) + 1 : epoch * EB + 1)
#else
#define next_fence(f) ((f) + 1)
#endif

/* A write that commits synchronously: its commit waits for the WAL flush
 * up to its commit record, which is after the last claim's (WAL is one
 * sequence), so that claim is durable from now on. */
inline durable() {
#ifdef ASYNC_CLAIMS
	dirty = false;
	oldFence = 0;
	crashChecked = false;
#ifdef BROKEN_EPOCH_ASYNC
	bumpDirty = false;
#endif
#else
	skip
#endif
}

/* The claim's transaction reads the epoch (spool_claim_epoch) and moves it
 * on first when a crash emptied the live copy; that transaction then
 * commits synchronously, whether it claims the job or not. Otherwise it
 * commits asynchronously (asyncTx). */
inline claim_epoch() {
#ifdef ASYNC_CLAIMS
	if
	:: epochLive -> asyncTx = true
	:: else ->
		epoch++;
		epochLive = true;
#ifdef BROKEN_EPOCH_ASYNC
		bumpDirty = true;
		asyncTx = true
#else
		asyncTx = false;
		durable()
#endif
	fi
#else
	skip
#endif
}

/* A fault point: nothing, a short or long pause, or death. Taking a fault
 * is one step, so that two processes cannot both take the last one. */
inline fault() {
	if
	:: true
	:: atomic { faults < MAXF -> faults++; wake = now + 1 }; (now >= wake)
	:: atomic { faults < MAXF -> faults++; wake = now + LONG }; (now >= wake)
	:: atomic { faults < MAXF -> faults++ }; goto died
	fi
}

proctype Worker(byte w) {
	byte id, fence, lease, sentAt, recvAt, wake, next, doneAt;
	bool got, lost;

restart:
	running[w] = false;
	heldUntil[w] = 0;
#ifdef ASYNC_CLAIMS
	undone[w] = false;
#endif
	got = false;
	lost = false;
	do
	:: job_state == DONE -> break
	:: job_state == AVAILABLE ->
		/* internal/engine/producer.go claim: the claim time is read before the claim is sent */
		/* a claim id unique per call (ClientID#n): taken in one step */
		atomic {
			claims++;
			id = claims;
#ifdef ASYNC_CLAIMS
			claimOf[w] = id;
			undone[w] = false
#else
			skip
#endif
		}
		sentAt = now;
		fault();
		atomic {
			claim_epoch();
			if
			:: job_state == AVAILABLE ->
#ifdef ASYNC_CLAIMS
				/* A job is pending only after a synchronous write (or
				 * none), so the row was durable before this claim. */
				if
				:: asyncTx -> oldFence = job_fence; dirty = true
				:: else -> skip
				fi;
#endif
				job_state = RUNNING;
				job_fence = next_fence(job_fence);
				job_lease = now + L;
				job_by = id;
				fence = job_fence;
				lease = job_lease;
				got = true
			:: else -> got = false
			fi;
#ifdef ASYNC_CLAIMS
			asyncTx = false
#else
			skip
#endif
		}
		/* the reply on its way back */
		if
		:: true
		:: atomic { faults < MAXF -> faults++; wake = now + 1 }; (now >= wake)
		:: atomic { faults < MAXF -> faults++; wake = now + LONG }; (now >= wake)
		:: atomic { faults < MAXF -> faults++ }; goto died
		:: atomic { got && faults < MAXF ->
			/* reply lost: the claim id is released before the next claim
			 * (JobReleaseClaim), which may come late or fail too */
			faults++;
			got = false };
			fault();
			if
			:: atomic {
				if
				:: job_state == RUNNING && job_by == id -> job_state = AVAILABLE; job_by = 0; durable()
				:: else -> skip
				fi
			}
			:: true
			fi
		fi;
		recvAt = now;
		if
		:: !got -> goto polled
		:: else -> skip
		fi;
		/* buffered until a worker goroutine is free */
		fault();
		/* internal/engine/executor.go start: start only while half the lease is left */
		atomic {
#ifdef BROKEN_CLAIM_TIME
			if
			:: now < recvAt + HALF ->
#else
			if
			:: now < sentAt + HALF ->
#endif
#ifdef STRICT_DONE
				assert(job_state != DONE); /* no_start_after_done */
#else
				assert(job_state != DONE || exempt(w)); /* no_start_after_done */
#endif
				assert(lease_current(fence) || exempt(w)); /* no_start_after_lease_ended */
				running[w] = true;
				heldUntil[w] = lease
			:: else ->
				/* handed back unstarted: a fenced release */
				if
				:: holds(fence) -> job_state = AVAILABLE; job_by = 0; durable()
				:: else -> skip
				fi
			fi
		}
		if
		:: !running[w] -> goto polled
		:: else -> skip
		fi;
		/* the handler works for 1, 4 or 9 ticks; heartbeats every HB */
		if
		:: doneAt = now + 1
		:: doneAt = now + 4
		:: doneAt = now + 9
		fi;
		next = now + HB;
		do
		:: now >= doneAt -> break
		:: now >= next && now < doneAt ->
			fault();
			atomic {
				if
				:: holds(fence) ->
					assert(job_by == id); /* no_stale_heartbeat */
					job_lease = now + L;
					heldUntil[w] = job_lease;
					durable()
				:: else -> lost = true
				fi
			}
			if
			:: lost -> break
			:: else -> next = now + HB
			fi
		od;
		running[w] = false;
		if
		:: lost -> lost = false; goto polled /* handler cancelled; its outcome is fenced out */
		:: else -> skip
		fi;
		if
		:: /* CompleteTx: the handler's effects and the completion commit together */
			fault();
			atomic {
				if
				:: holds(fence) ->
					assert(job_fence == fence && job_by == id); /* no_stale_completion */
					job_state = DONE;
					txEffects++;
					durable()
				:: else -> skip /* the transaction rolls back, effects too */
				fi
			}
		:: /* the outcome writer writes the outcome in a later batch */
			fault();
			atomic {
				if
				:: holds(fence) ->
					assert(job_fence == fence && job_by == id); /* no_stale_completion */
					job_state = DONE;
					durable()
				:: else -> skip
				fi
			}
		fi;
polled:
#ifdef ASYNC_CLAIMS
		undone[w] = false
#else
		skip
#endif
	od;
	alive--;
	goto end;

died:
	/* kill -9: everything in memory is gone; the process comes back */
	goto restart;
end:
	skip
}

/* internal/maintenance rescue, run by the elected leader every RESCUE ticks */
active proctype Rescuer() {
	byte next = RESCUE;
	do
	:: job_state == DONE -> break
	:: now >= next ->
#ifndef BROKEN_NO_RESCUE
		atomic {
			if
#ifdef BROKEN_RESCUE_EARLY
			:: job_state == RUNNING && job_lease < now + HALF ->
#else
			:: job_state == RUNNING && job_lease < now ->
#endif
				job_state = AVAILABLE; job_by = 0; durable()
			:: else -> skip
			fi
		}
#endif
		next = now + RESCUE
	od;
	alive--
}

#ifdef ASYNC_CLAIMS
/* The database server crashes (a fault) and is back at once: crash
 * recovery replays only the flushed WAL, so an unflushed claim is undone,
 * and it empties unlogged tables (spool_epoch_live). While a claim is
 * unflushed, the server takes one decision a tick, at any point of it,
 * whether to crash (Spin tries every point, so every moment of a crash is
 * covered). The WAL writer's flush needs no step of its own: a claim that
 * is flushed is one that no crash undoes. A crash that undoes no claim
 * only moves the epoch on and makes the next claim synchronous, which can
 * only take behaviours away: the model leaves it out. */
active proctype Server() {
end:
	do
	:: unflushed && !crashChecked ->
		atomic {
			crashChecked = true;
			if
			:: true
			:: unflushed && faults < MAXF ->
				faults++;
				undone[0] = undone[0] || (dirty && claimOf[0] == job_by);
				undone[1] = undone[1] || (dirty && claimOf[1] == job_by);
				if
				:: dirty ->
					job_state = AVAILABLE;
					job_fence = oldFence;
					job_by = 0;
					dirty = false;
					oldFence = 0
				:: else -> skip
				fi;
#ifdef BROKEN_EPOCH_ASYNC
				if
				:: bumpDirty -> epoch--; bumpDirty = false
				:: else -> skip
				fi;
#endif
				epochLive = false;
				crashChecked = false
			fi
		}
	od
}
#endif

active proctype Clock() {
	do
	:: alive == 0 -> break
	:: timeout ->
		assert(now < MAXT); /* job_done_in_time: not lost */
#ifdef ASYNC_CLAIMS
		crashChecked = false;
#endif
		now++
	od;
	assert(job_state == DONE) /* job_done_in_time */
}

active proctype Invariants() {
end:
	do
	:: atomic { two_live_leases -> assert(!two_live_leases) } /* no_two_live_leases */
	:: atomic { !tx_effects_at_most_once -> assert(tx_effects_at_most_once) } /* tx_effects_at_most_once */
	od
}

init {
	atomic {
		run Worker(0);
		run Worker(1)
	}
}
