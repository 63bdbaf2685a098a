"""Warm command processes: ``ask`` and ``search`` answered by a process that has already
started.

A command-line ``ask`` spends most of a warm answer's time before its first stage:
starting the interpreter, importing the application, building the embedding model's
session and the o200k_base token table (about 1.2-1.9 s on two cores, against 0.1 s of
retrieval and scoring). The first ``ask`` or ``search`` runs in its own process as
always and then starts a warm process in the background (:mod:`.server`), which imports
all that once. Later ``ask`` and ``search`` commands from the same context connect to
it (:mod:`.client`), hand it their command line and their standard input, output and
error (the descriptors themselves, over a Unix socket), and exit with the status it
reports; the warm process runs the command as the command would have run itself, so
its output, exit status, terminal behaviour and errors are the same.

What a warm process keeps between commands: the imports, the embedding model's session
and the token table (:mod:`ragwright.runtime.kept`). What it does not keep: settings,
stores and the index are opened by each command and closed at its end, so an
ingestion, a calibration or a key change made in between is seen by the next command,
and an ingestion is never locked out by a warm process.

One warm process serves one *context*: the user and file mode mask, the Python
interpreter, the installed code (the modification times of ragwright's files and of the
import path), the working directory and the environment (volatile terminal variables
aside) are hashed into its socket's name (:mod:`.context`). A command from another
context (another ``RAGWRIGHT_HOME``, another setting, upgraded code) finds no process at
its address and starts its own. The socket is in Linux's abstract namespace and the
process serves only connections of its own user (``SO_PEERCRED``). It runs one command
at a time; a command that arrives while another runs is run by its own process. It
exits after ``RAGWRIGHT_COMMAND_KEEP_WARM`` seconds without a command (``0``: no warm
process). ``ragwright model status`` shows it and ``ragwright model stop`` ends it.
"""
