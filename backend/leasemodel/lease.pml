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
 * a claim's reply (connection cut after the claim committed).
 *
 * Properties, checked as assertions:
 *   no_start_after_lease_ended   a handler starts only on a lease that is
 *                                current (its fence) and not over;
 *   no_stale_completion          a completion is accepted only under the
 *                                job's current fence;
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
 *                          stays leased for ever.
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
byte job_fence = 0;   /* bumped by every claim */
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

#define two_live_leases (running[0] && running[1] && heldUntil[0] >= now && heldUntil[1] >= now)
#define tx_effects_at_most_once (txEffects <= 1)
#define lease_current(f) (job_state == RUNNING && job_fence == (f) && now <= job_lease)

#ifdef BROKEN_NO_FENCE
#define holds(f) (job_state == RUNNING)
#else
#define holds(f) (job_state == RUNNING && job_fence == (f))
#endif

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
	got = false;
	lost = false;
	do
	:: job_state == DONE -> break
	:: job_state == AVAILABLE ->
		/* internal/engine/producer.go claim: the claim time is read before the claim is sent */
		/* a claim id unique per call (ClientID#n): taken in one step */
		atomic {
			claims++;
			id = claims
		}
		sentAt = now;
		fault();
		atomic {
			if
			:: job_state == AVAILABLE ->
				job_state = RUNNING;
				job_fence++;
				job_lease = now + L;
				job_by = id;
				fence = job_fence;
				lease = job_lease;
				got = true
			:: else -> got = false
			fi
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
				:: job_state == RUNNING && job_by == id -> job_state = AVAILABLE; job_by = 0
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
				assert(lease_current(fence)); /* no_start_after_lease_ended */
				running[w] = true;
				heldUntil[w] = lease
			:: else ->
				/* handed back unstarted: a fenced release */
				if
				:: holds(fence) -> job_state = AVAILABLE; job_by = 0
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
				:: holds(fence) -> job_lease = now + L; heldUntil[w] = job_lease
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
					assert(job_fence == fence); /* no_stale_completion */
					job_state = DONE;
					txEffects++
				:: else -> skip /* the transaction rolls back, effects too */
				fi
			}
		:: /* the outcome writer writes the outcome in a later batch */
			fault();
			atomic {
				if
				:: holds(fence) ->
					assert(job_fence == fence); /* no_stale_completion */
					job_state = DONE
				:: else -> skip
				fi
			}
		fi;
polled:
		skip
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
				job_state = AVAILABLE; job_by = 0
			:: else -> skip
			fi
		}
#endif
		next = now + RESCUE
	od;
	alive--
}

active proctype Clock() {
	do
	:: alive == 0 -> break
	:: timeout ->
		assert(now < MAXT); /* job_done_in_time: not lost */
		now++
	od;
	assert(job_state == DONE)
}

active proctype Invariants() {
end:
	do
	:: atomic { two_live_leases -> assert(!two_live_leases) }
	:: atomic { !tx_effects_at_most_once -> assert(tx_effects_at_most_once) }
	od
}

init {
	atomic {
		run Worker(0);
		run Worker(1)
	}
}
