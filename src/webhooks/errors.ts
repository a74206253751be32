import { AppError } from '../errors.js';

export const webhookErrors = {
  invalid: (why: string) => new AppError('invalid_webhook', `Invalid webhook: ${why}`),
  notFound: () => new AppError('webhook_not_found', 'Webhook not found'),
  limit: (max: number) => new AppError('webhook_limit', `The account already has ${max} webhooks; delete one first`),
};
