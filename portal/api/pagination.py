from rest_framework.pagination import PageNumberPagination


class Pagination(PageNumberPagination):
    """`{"count", "next", "previous", "results"}` with `page_size` up to 1,000."""

    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000
