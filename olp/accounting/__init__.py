"""Who used what: per-key limits (:class:`RequestLimiter`), the usage ledger and the audit
trail (:class:`Recorder`, batched off the request path), and the views that read them back.
It depends on the store only; the HTTP layer feeds it."""

from ._audit_row import MAX_ACTION_CHARS as MAX_ACTION_CHARS
from ._audit_row import MAX_ENDPOINT_CHARS as MAX_ENDPOINT_CHARS
from ._audit_row import MAX_MODEL_CHARS as MAX_MODEL_CHARS
from ._audit_row import AuditRow as AuditRow
from ._audit_row import bounded as bounded
from ._audit_row import clip as clip
from ._audit_row import describe_action as describe_action
from ._limiter import LimitExceeded as LimitExceeded
from ._limiter import RequestLimiter as RequestLimiter
from ._limiter import Reservation as Reservation
from ._limiter import Seed as Seed
from ._recorder import Recorder as Recorder
from ._recorder import Retention as Retention
from ._recorder import UsageDelta as UsageDelta
from ._throttle import AuditThrottle as AuditThrottle
from ._views import MAX_AUDIT_LIMIT as MAX_AUDIT_LIMIT
from ._views import audit_page as audit_page
from ._views import load_counts as load_counts
from ._views import quota_figures as quota_figures
from ._views import quota_view as quota_view
from ._views import today_by_key as today_by_key
from ._views import usage_report as usage_report
from ._views import usage_totals as usage_totals
from ._windows import day_of as day_of
from ._windows import duration_text as duration_text
from ._windows import parse_since as parse_since
