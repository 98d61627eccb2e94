"""The REST API (`dsx serve`): routes translate HTTP to domain calls, nothing else.

The only package that imports fastapi. Authentication, size limits, rate limiting and
the error table live in `security` and `errors`; routes live in one module per area.
"""
