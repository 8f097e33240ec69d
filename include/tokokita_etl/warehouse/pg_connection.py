"""The warehouse's PostgreSQL connection: psycopg with a deadline of its own for every answer.

Its own module so that psycopg is imported only by a PostgreSQL warehouse (`Warehouse.engine`,
or the state database); `tokokita_etl.warehouse.database` names these classes too.
"""

from __future__ import annotations

import psycopg


class NoAnswerError(psycopg.OperationalError):
    """The server did not answer within the client's deadline; the connection was closed."""


class _AnsweredConnection(psycopg.Connection):
    """A psycopg connection that waits at most `answer_timeout_s` for the server on every
    operation (a statement with its results, a COPY write, a fetch), then closes itself.

    `statement_timeout` is enforced by the server: a server that stops answering (its
    processes frozen or swapped out, its host hung) never sends the cancellation, and the
    host's kernel keeps acknowledging TCP keepalives and data, so without a deadline of its
    own the client waited forever for a result that never came."""

    answer_timeout_s: float | None = None

    def wait(self, gen, interval: float = 0.1, timeout: float | None = None):
        if timeout is None:
            timeout = self.answer_timeout_s
        try:
            return super().wait(gen, interval, timeout)
        except psycopg.errors._WaitTimeout:  # psycopg's own timeout of `wait`
            self.pgconn.finish()  # mid-protocol: the connection cannot be used again
            raise NoAnswerError(
                f"no answer from the server within {timeout:g} s (db_answer_timeout_s); "
                "the connection was closed") from None
