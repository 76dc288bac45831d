from billing.management.commands.close import Command as CloseCommand


class Command(CloseCommand):
    help = "An alias of `close`, which issues a month's invoices as one of its steps."
